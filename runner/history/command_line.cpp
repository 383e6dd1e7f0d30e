#include "history/command_line.hpp"

#include <iostream>

namespace runner::history {
namespace po = boost::program_options;

bool parse_command_line(const std::vector<std::string>& args, const po::options_description& flags,
                        const std::string& command, const char* usage, ParsedCommandLine& out, int& code) {
  po::options_description all;
  all.add(flags).add_options()("args", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("args", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), out.vm);
    po::notify(out.vm);
  } catch (const po::error& e) {
    std::cerr << "runner" << (command.empty() ? "" : " " + command) << ": " << e.what() << "\n" << usage;
    code = 2;
    return false;
  }
  if (out.vm.count("help")) {
    std::cout << usage << "\n" << flags;
    code = 0;
    return false;
  }
  if (out.vm.count("args")) out.positional = out.vm["args"].as<std::vector<std::string>>();
  return true;
}

}  // namespace runner::history
