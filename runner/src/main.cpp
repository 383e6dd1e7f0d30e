// runner: run an experiment, list or describe plugins, re-render reports.
#include <iostream>

#include <boost/program_options.hpp>

#include "execute.hpp"
#include "registry.hpp"
#include "validate.hpp"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: runner <experiment.yaml> [--set key.path=value]... [--device cpu|cuda] [--out DIR]\n"
    "                                [--reports DIR] [--dry-run] [--smoke] [--plugin-path DIR]...\n"
    "       runner launch --nproc-per-node N <experiment.yaml> [options]\n"
    "                                      N local ranks (one per GPU, or Gloo on CPU); torchrun/srun also work\n"
    "       runner plugins                 list loadable plugins (and files that were skipped)\n"
    "       runner describe <kind>/<name>  a plugin's options: type, default, meaning\n"
    "       runner report <run-dir>        re-render tables from stored results (into --reports, default reports/)\n";

}  // namespace

int main(int argc, char** argv) {
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
      ("backend", po::value<std::string>(), "multi-process runs: auto (nccl for CUDA, gloo for CPU), gloo or nccl")
      ("nproc-per-node", po::value<int>(), "runner launch: number of local ranks")
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
    const bool launch = command == "launch";
    if (launch != (vm.count("nproc-per-node") > 0)) {
      std::cerr << (launch ? "runner launch: --nproc-per-node N is required\n"
                           : "runner: --nproc-per-node belongs to `runner launch`\n") << kUsage;
      return 2;
    }
    if (args.size() != (launch ? 2u : 1u)) {
      std::cerr << "runner: " << (args.size() < 2 ? std::string("missing the experiment file")
                                                  : "unexpected argument '" + args[launch ? 2 : 1] + "'")
                << "\n" << kUsage;
      return 2;
    }
    for (const auto& e : registry.load_errors())
      std::cerr << "warning: skipped plugin " << e.file.string() << ": " << e.message << "\n";
    runner::RunOptions options;
    options.experiment = launch ? args[1] : command;
    if (vm.count("set")) options.overrides = vm["set"].as<std::vector<std::string>>();
    if (vm.count("device")) options.device = vm["device"].as<std::string>();
    if (vm.count("out")) options.out = vm["out"].as<std::string>();
    if (vm.count("reports")) options.reports_dir = vm["reports"].as<std::string>();
    options.dry_run = vm.count("dry-run") > 0;
    options.smoke = vm.count("smoke") > 0;
    if (vm.count("backend")) options.backend = vm["backend"].as<std::string>();
    if (launch) {
      // Each rank gets this command line without `launch` and --nproc-per-node.
      std::vector<std::string> rank_args;
      bool dropped_launch = false;
      for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "launch" && !dropped_launch) {
          dropped_launch = true;
          continue;
        }
        if (a == "--nproc-per-node") { ++i; continue; }
        if (a.rfind("--nproc-per-node=", 0) == 0) continue;
        rank_args.push_back(a);
      }
      return runner::launch_local(options, registry, vm["nproc-per-node"].as<int>(), rank_args);
    }
    return runner::run_experiment(options, registry);
  } catch (const runner::ConfigError& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "runner: " << e.what() << "\n";
    return 1;
  }
}
