// `runner ab EXPERIMENT --a CMD --b CMD [--rounds 3]`: an A/B of two builds
// measured interleaved. Each round runs the experiment once with A's command
// and once with B's, in the order A B B A A B ... (interleave.hpp), into
// --work; each side's rounds are merged and compared as `runner compare`
// would compare two runs. Drift of the machine between rounds lands on both
// sides, which a compare of two runs made one after the other cannot promise.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <boost/program_options.hpp>

#include "history/cli.hpp"
#include "history/command_line.hpp"
#include "history/interleave.hpp"
#include "history/shell.hpp"

namespace runner::history {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: runner ab EXPERIMENT.yaml --a CMD --b CMD [--rounds 3] [--set k=v]... [--filter X] [--device cpu|cuda]\n"
    "                 [--smoke] [--work DIR] [--format table|markdown|json] [--threshold 0.05] [--alpha 0.05]\n"
    "                 [--ignore-param NAME]... [--output FILE]\n"
    "  Runs the experiment with A's and B's runner command alternately (A B B A A B ..., --rounds\n"
    "  runs a side), then compares B with A over the rounds (exit 1 on a regression, 2 on bad input).\n"
    "  CMD is a runner, or a shell command prefix ending in one (`env X=1 old/runner`); each run is\n"
    "  CMD EXPERIMENT --out DIR --history off plus --set, --filter, --device, --smoke.\n";

std::string opt(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? vm[name].as<std::string>() : std::string();
}

}  // namespace

int ab_command(const std::vector<std::string>& args) {
  po::options_description flags("ab options");
  flags.add_options()("help,h", "show this help")
      ("a", po::value<std::string>(), "the baseline's runner command")
      ("b", po::value<std::string>(), "the candidate's runner command")
      ("rounds", po::value<int>()->default_value(3), "runs a side (3 or more)")
      ("set,s", po::value<std::vector<std::string>>()->composing(), "override of every run (repeatable)")
      ("filter", po::value<std::string>(), "only these points (passed to every run)")
      ("device", po::value<std::string>(), "cpu or cuda")
      ("smoke", "run with the experiment's smoke: overrides")
      ("work", po::value<std::string>(), "directory for the runs (default: new under $TMPDIR)")
      ("format,f", po::value<std::string>()->default_value("table"), "table, markdown or json")
      ("threshold", po::value<double>()->default_value(0.05, "0.05"), "relative change below which a metric is 'same'")
      ("alpha", po::value<double>()->default_value(0.05, "0.05"), "significance level")
      ("ignore-param", po::value<std::vector<std::string>>()->composing(), "parameters that differ on purpose")
      ("output,o", po::value<std::string>(), "also write the rendering to this file");
  ParsedCommandLine p;
  int code = 0;
  if (!parse_command_line(args, flags, "ab", kUsage, p, code)) return code;
  const po::variables_map& vm = p.vm;
  if (p.positional.size() != 1 || !vm.count("a") || !vm.count("b")) {
    std::cerr << "runner ab: give one experiment file, --a CMD and --b CMD\n" << kUsage;
    return 2;
  }
  const std::string experiment = p.positional[0];
  if (!fs::is_regular_file(experiment)) {
    std::cerr << "runner ab: " << experiment << ": no such experiment file\n";
    return 2;
  }
  const int rounds = vm["rounds"].as<int>();
  if (rounds < 3) {
    std::cerr << "runner ab: --rounds " << rounds << ": needs 3 or more (a test over rounds needs 3 a side)\n";
    return 2;
  }
  const std::string format = opt(vm, "format");
  if (format != "table" && format != "markdown" && format != "json") {
    std::cerr << "runner ab: --format '" << format << "' is not one of table, markdown, json\n";
    return 2;
  }
  CompareOptions o;
  o.threshold = vm["threshold"].as<double>();
  o.alpha = vm["alpha"].as<double>();
  if (o.threshold < 0 || o.alpha <= 0 || o.alpha >= 1) {
    std::cerr << "runner ab: --threshold must be >= 0 and --alpha in (0, 1)\n";
    return 2;
  }
  if (vm.count("ignore-param"))
    for (const auto& v : vm["ignore-param"].as<std::vector<std::string>>()) o.ignore_params.push_back(v);
  std::string work = opt(vm, "work");
  if (work.empty()) {
    run_shell("mktemp -d \"${TMPDIR:-/tmp}/runner-ab.XXXXXX\"", &work);
    while (!work.empty() && work.back() == '\n') work.pop_back();
  }
  fs::create_directories(work);
  std::string tail = " --history off";
  if (vm.count("set"))
    for (const auto& s : vm["set"].as<std::vector<std::string>>()) tail += " --set " + shell_quote(s);
  if (vm.count("filter")) tail += " --filter " + shell_quote(opt(vm, "filter"));
  if (vm.count("device")) tail += " --device " + shell_quote(opt(vm, "device"));
  if (vm.count("smoke")) tail += " --smoke";
  std::vector<Side> sides[2];
  int done[2] = {0, 0};
  std::cerr << "runner ab: " << rounds << " rounds a side, order " << interleaved_order(rounds) << ", runs in " << work
            << "\n";
  for (const char side : interleaved_order(rounds)) {
    const int s = side == 'A' ? 0 : 1;
    const fs::path out = fs::path(work) / (std::string(1, static_cast<char>(side + 32)) + "-" + std::to_string(++done[s]));
    fs::remove_all(out);
    const std::string cmd = opt(vm, side == 'A' ? "a" : "b") + " " + shell_quote(experiment) + " --out " +
                            shell_quote(out.string()) + tail + " > " + shell_quote(out.string() + ".log") + " 2>&1";
    const int rc = run_shell(cmd);
    if (!fs::exists(out / "results.jsonl")) {
      std::cerr << "runner ab: " << side << " round " << done[s] << " recorded nothing (exit " << rc << "; see "
                << out.string() << ".log)\n";
      return 2;
    }
    std::cerr << "runner ab: " << side << " round " << done[s] << " done (" << out.string() << ")\n";
    sides[s].push_back(resolve_side(out.string(), nullptr, nullptr, ""));
  }
  try {
    Comparison c = compare(merge_rounds(sides[0], "A"), merge_rounds(sides[1], "B"), o);
    auto render = [&](std::ostream& out) {
      if (format == "json") write_json(c, out);
      else if (format == "markdown") render_markdown(c, out);
      else render_table(c, out, false);
    };
    render(std::cout);
    std::cout.flush();
    if (vm.count("output")) {
      std::ofstream out(opt(vm, "output"));
      render(out);
      if (!out) throw std::runtime_error("cannot write " + opt(vm, "output"));
    }
    return c.regression() ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "runner ab: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace runner::history
