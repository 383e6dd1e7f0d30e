// runner: run an experiment, list or describe plugins, re-render reports.
#include <iostream>

#include <boost/program_options.hpp>

#include "execute.hpp"
#include "history/cli.hpp"
#include "registry.hpp"
#include "validate.hpp"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: runner <experiment.yaml> [--set key.path=value]... [--device cpu|cuda] [--out DIR]\n"
    "                                [--reports DIR] [--dry-run] [--smoke] [--plugin-path DIR]...\n"
    "       runner plugins                 list loadable plugins (and files that were skipped)\n"
    "       runner describe <kind>/<name>  a plugin's options: type, default, meaning\n"
    "       runner report <run-dir>        re-render tables from stored results (into --reports, default reports/)\n"
    "       runner history [--experiment X] [--since 7d] [--import DIR...] [--html DIR]   runs in the history\n"
    "       runner compare A B             per point and metric: ratio, U-test p, verdict; exit 1 on a regression\n"
    "       runner schedule <experiment.yaml> --every 24h [--compare-to last-good] | --list | --remove NAME\n";

}  // namespace

int main(int argc, char** argv) {
  // The history verbs parse their own options.
  if (argc >= 2) {
    const std::string verb = argv[1];
    const std::vector<std::string> rest(argv + 2, argv + argc);
    try {
      if (verb == "history") return runner::history::history_command(rest);
      if (verb == "compare") return runner::history::compare_command(rest);
      if (verb == "schedule")
        return runner::history::schedule_command(rest, std::filesystem::canonical("/proc/self/exe").string());
    } catch (const std::exception& e) {
      std::cerr << "runner " << verb << ": " << e.what() << "\n";
      return 2;
    }
  }
  po::options_description flags("options");
  flags.add_options()
      ("help,h", "show this help")
      ("set,s", po::value<std::vector<std::string>>()->composing(), "override a key: key.path=value (repeatable)")
      ("device", po::value<std::string>(), "cpu or cuda (default: the experiment's, else cuda when present)")
      ("out,o", po::value<std::string>(), "run directory (default runs/<experiment>/<UTC time>)")
      ("reports", po::value<std::string>(), "also write reports into this directory (e.g. reports)")
      ("dry-run", "print the expanded points and exit")
      ("smoke", "apply the experiment's smoke: overrides (seconds on a CPU)")
      ("plugin-path", po::value<std::vector<std::string>>()->composing(), "extra plugin directory (repeatable)")
      ("history", po::value<std::string>(), "history database for this run, or off (default: RUNNER_HISTORY, the experiment's history:, ~/.local/share/runner/history.sqlite)")
      ("args", po::value<std::vector<std::string>>(), "command and arguments");
  po::positional_options_description positional;
  positional.add("args", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(flags).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "runner: " << e.what() << "\n" << kUsage;
    return 2;
  }
  const auto args = vm.count("args") ? vm["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (vm.count("help") || args.empty()) {
    std::cout << kUsage << "\n" << flags;
    return args.empty() && !vm.count("help") ? 2 : 0;
  }

  std::vector<std::filesystem::path> extra;
  if (vm.count("plugin-path"))
    for (const auto& p : vm["plugin-path"].as<std::vector<std::string>>()) extra.emplace_back(p);
  runner::PluginRegistry registry;
  registry.scan(runner::PluginRegistry::search_path(extra));

  try {
    const std::string& command = args[0];
    if (command == "plugins") {
      runner::list_plugins(registry, std::cout);
      return 0;
    }
    if (command == "describe") {
      if (args.size() != 2) {
        std::cerr << "runner describe: expected <kind>/<name>, e.g. task/device_ceilings\n";
        return 2;
      }
      if (!runner::describe_plugin(registry, args[1], std::cout)) {
        std::cerr << "runner describe: no plugin '" << args[1] << "' (see `runner plugins`)\n";
        return 2;
      }
      return 0;
    }
    if (command == "report") {
      if (args.size() != 2) {
        std::cerr << "runner report: expected a run directory\n";
        return 2;
      }
      return runner::render_reports(args[1], vm.count("reports") ? vm["reports"].as<std::string>() : "reports");
    }
    if (args.size() != 1) {
      std::cerr << "runner: unexpected argument '" << args[1] << "'\n" << kUsage;
      return 2;
    }
    for (const auto& e : registry.load_errors())
      std::cerr << "warning: skipped plugin " << e.file.string() << ": " << e.message << "\n";
    runner::RunOptions options;
    options.experiment = command;
    if (vm.count("set")) options.overrides = vm["set"].as<std::vector<std::string>>();
    if (vm.count("device")) options.device = vm["device"].as<std::string>();
    if (vm.count("out")) options.out = vm["out"].as<std::string>();
    if (vm.count("reports")) options.reports_dir = vm["reports"].as<std::string>();
    if (vm.count("history")) options.history = vm["history"].as<std::string>();
    options.dry_run = vm.count("dry-run") > 0;
    options.smoke = vm.count("smoke") > 0;
    return runner::run_experiment(options, registry);
  } catch (const runner::ConfigError& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 1;
  }
}
