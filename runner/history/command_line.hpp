// The history commands' (history, compare, schedule, bisect) one way to read their
// arguments: named options plus positional words, a one-line error with the usage, --help.
#pragma once
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace runner::history {

struct ParsedCommandLine {
  boost::program_options::variables_map vm;
  std::vector<std::string> positional;
};

// Parses `args` against `flags`. Returns false when the command should end with `code`:
// 0 after printing the help (--help), 2 after a one-line error ("runner <command>: ...")
// and the usage.
bool parse_command_line(const std::vector<std::string>& args, const boost::program_options::options_description& flags,
                        const std::string& command, const char* usage, ParsedCommandLine& out, int& code);

}  // namespace runner::history
