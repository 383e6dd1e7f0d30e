// runner-torch: the LibTorch host behind `runner` (front_main.cpp execs it with the user's
// arguments): run an experiment, launch ranks, list or describe plugins and experiments,
// re-render reports. history, compare and schedule never reach it.
#include <cstdlib>
#include <iostream>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <csignal>
#include <regex>

#include "base/stderr_line.hpp"
#include "base/text_distance.hpp"
#include "config/catalog.hpp"
#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "config/sweep.hpp"
#include "config/validate.hpp"
#include "distributed/distributed.hpp"
#include "distributed/launch.hpp"
#include "distributed/submit.hpp"
#include "output/committed_reports_check.hpp"
#include "output/merge.hpp"
#include "output/run_dir.hpp"
#include "output/run_reports.hpp"
#include "report/report.hpp"
#include "run/execute.hpp"
#include "run/run_many.hpp"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: runner <experiment.yaml | name> [key.path=value]... [--set key.path=value]... [--device cpu|cuda]\n"
    "                                [--out DIR] [--reports DIR] [--filter REGEX] [--dry-run] [--cfg] [--smoke]\n"
    "                                [--plugin-path DIR]... [--max-points N] [--resume RUN_DIR] [--shard I/N]\n"
    "                                [--workers N | --gpus all|0-3|0,2]\n"
    "       runner <experiment.yaml> <experiment.yaml>... [options]\n"
    "                                      each in turn into its own run directory, one summary at the end\n"
    "       runner quickstart              a one-minute CPU run: two matmul sizes and a small train step\n"
    "       runner list [DIR]              experiments in DIR (default experiments/): points, description\n"
    "       runner launch --nproc-per-node N <experiment.yaml> [options]\n"
    "                                      N local ranks (one per GPU, or Gloo on CPU); torchrun/srun also work\n"
    "       runner launch --nnodes M --node-rank R --master-addr HOST --master-port P --nproc-per-node N ...\n"
    "                                      one launcher per node; node 0 (at HOST:P) hosts the rendezvous\n"
    "       runner plugins                 list loadable plugins (and files that were skipped)\n"
    "       runner describe <kind>/<name>  a plugin's options: type, range, default, meaning\n"
    "       runner merge <shard-dir>... --out DIR   join the shards of one sweep (--shard I/N) into one run\n"
    "       runner submit <experiment.yaml> --slurm --array N [--parallel P] [--sbatch-arg ARG]... [--dry-run]\n"
    "                                      the sweep as a Slurm job array of N shards, then a job that merges them\n"
    "       runner report <run-dir>...     re-render a run's tables and figures from its stored records\n"
    "       runner report --pdf            build reports/writeup.pdf (latexmk) from the rendered reports\n"
    "       runner report --check          fail when a committed report differs from its records' rendering\n"
    "       runner history [--experiment X] [--since 7d] [--import DIR...] [--html DIR]   runs in the history\n"
    "       runner compare A B             per point and metric: ratio, U-test p, verdict; exit 1 on a regression\n"
    "       runner schedule <experiment.yaml> --every 24h [--compare-to last-good] | --list | --remove NAME\n"
    "       runner ab <experiment.yaml> --a CMD --b CMD [--rounds 3]   two builds run alternately, compared over rounds\n"
    "       runner bisect GOOD BAD --experiment X --filter POINT   the first commit where a point regresses\n"
    "       runner --version\n"
    "`runner <command> --help` explains one command.\n";

struct Command {
  const char* name;
  const char* help;
};

// Help of each subcommand: what it does, its arguments and the flags it reads.
const Command kCommands[] = {
    {"launch",
     "usage: runner launch --nproc-per-node N <experiment.yaml | name> [run options] [--backend auto|gloo|nccl]\n"
     "Starts N local ranks of the same run (one per GPU, or N CPU processes with --device cpu), hosts\n"
     "their rendezvous store and supervises them: when one exits non-zero or dies, the others are stopped\n"
     "and launch exits with that rank's code and last error line. Rank 0 writes the run directory.\n"
     "--backend: auto (NCCL for CUDA tensors, Gloo for CPU ones), gloo, or nccl. The run options are\n"
     "those of `runner <experiment.yaml>` (--set, --device, --out, --smoke, ...). torchrun and srun\n"
     "also work: torchrun --no-python --nproc-per-node 2 build/runner x.yaml.\n"},
    {"list",
     "usage: runner list [DIR]\n"
     "Lists the experiment files (*.yaml) of DIR (default experiments/) with their experiment name,\n"
     "number of sweep points and description. A file that does not load is listed with its error\n"
     "(exit code 2).\n"},
    {"plugins",
     "usage: runner plugins [--plugin-path DIR]...\n"
     "Lists every loadable plugin: kind, name, version, description and file; then the files that\n"
     "were skipped and why (not a plugin, another plugin API, LibTorch or C++ ABI, a throwing manifest).\n"
     "Search path: the build's plugins/, then $RUNNER_PLUGIN_PATH (colon-separated), then --plugin-path.\n"},
    {"describe",
     "usage: runner describe <kind>/<name> [--markdown]     e.g. runner describe task/device_ceilings\n"
     "Prints a plugin's options (type, allowed range, default, meaning) and the metrics and labels\n"
     "its records carry (what report tables can name). --markdown: only the options, as the table\n"
     "of the plugin's README (scripts/plugin_readme_tables.py writes it there).\n"},
    {"report",
     "usage: runner report <run-dir> [<run-dir>...] [--reports DIR] [--spec FILE] [--pdf]\n"
     "       runner report --pdf [--reports DIR]\n"
     "       runner report --check [--reports DIR]   (re-renders every committed report; fails on a stale one)\n"
     "Re-renders the tables and figures of a run from its stored config.yaml and results.jsonl,\n"
     "without re-running. Writes each report into <id>/ (<id>.md, .tex, .csv, figures/) of <run-dir>/reports/\n"
     "unless --reports names another directory (e.g. --reports reports to update the project's committed\n"
     "reports, reports/<id>/; their records live in reports/<experiment>/data/). A truncated last record (a killed\n"
     "run) is skipped with a warning; a run with fewer records than points is flagged as partial.\n"
     "Several runs of one experiment with the same report spec (e.g. `runner launch` with 2, 4 and 6\n"
     "processes) merge into one report, written into the first run's reports/ unless --reports.\n"
     "--spec experiments/<name>.yaml renders with that file's report: spec instead of the stored one\n"
     "(runs of the same experiment only), e.g. old records with a column added since.\n"
     "Into the project's reports (a folder with renders.txt) only records of a clean commit render;\n"
     "--allow-dirty accepts uncommitted changes or an unknown commit, and every caption then says so.\n"
     "Figures are drawn by scripts/figures/plot.py with $RUNNER_PYTHON (default: the build's Python),\n"
     "which needs matplotlib; without it the tables still render and a warning says why.\n"
     "--pdf then builds DIR/writeup.pdf (default DIR: reports) from DIR/writeup.tex with latexmk and\n"
     "fails on an undefined reference or a missing input (read from the LaTeX log).\n"},
};

const char* command_help(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return c.help;
  return nullptr;
}

// `runner device_ceilings` means experiments/device_ceilings.yaml (or a study's
// experiments/studies/<name>.yaml); a file path is used as it is. A name that matches
// nothing gets the closest experiment's name.
std::filesystem::path experiment_file(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(arg, ec) || arg.find('/') != std::string::npos) return arg;
  const fs::path dir = "experiments";
  const std::string file = fs::path(arg).extension() == ".yaml" ? arg : arg + ".yaml";
  for (const fs::path& named : {dir / file, dir / "studies" / file})
    if (fs::exists(named, ec)) return named;
  const fs::path named = dir / file;
  std::vector<std::string> names;
  for (const fs::path& d : {dir, dir / "studies"})
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  if (names.empty()) return arg;  // load_experiment says "no such experiment file"
  throw runner::ConfigError("'" + arg + "': no such experiment file, and no experiments/" + named.filename().string() +
                            runner::suggestion(fs::path(arg).stem().string(), names) + " (runner list shows them)");
}

// An argument after the experiment that names another one (`runner a.yaml b.yaml`): a
// .yaml/.yml path, an existing file, or the name of an experiment under experiments/.
bool names_experiment(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string ext = fs::path(arg).extension().string();
  if (ext == ".yaml" || ext == ".yml" || fs::is_regular_file(arg, ec)) return true;
  return fs::exists(fs::path("experiments") / (arg + ".yaml"), ec) ||
         fs::exists(fs::path("experiments") / "studies" / (arg + ".yaml"), ec);
}

// Every long option of `options` as "--name", for "did you mean" on a typo.
std::vector<std::string> option_names(const po::options_description& options) {
  std::vector<std::string> names;
  for (const auto& o : options.options()) names.push_back("--" + o->long_name());
  return names;
}

// Flags that name things which must exist; caught here so no raw filesystem
// error reaches the user later.
void check_paths(const po::variables_map& vm) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (vm.count("plugin-path")) {
    for (const auto& dir : vm["plugin-path"].as<std::vector<std::string>>())
      if (!fs::is_directory(dir, ec))
        throw runner::ConfigError("--plugin-path " + dir + ": no such directory");
  }
  // A launched rank other than 0 finds the directory rank 0 already made; only rank 0 checks it.
  const auto env_rank = [](const char* name) { const char* v = std::getenv(name); return v ? std::string(v) : ""; };
  const std::string rank = !env_rank("RANK").empty() ? env_rank("RANK") : env_rank("SLURM_PROCID");
  // So does the launcher of any node but 0: node 0's rank 0 may already have made it.
  const bool other_node = vm.count("node-rank") && vm["node-rank"].as<int>() != 0;
  if (vm.count("out") && (rank.empty() || rank == "0") && !other_node) {
    const fs::path out = vm["out"].as<std::string>();
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      throw runner::ConfigError("--out " + out.string() + ": is a file; name a new directory for the run");
    if (fs::is_directory(out, ec) && !fs::is_empty(out, ec))
      throw runner::ConfigError("--out " + out.string() +
                                ": exists and is not empty; a run needs a new (or empty) directory, so nothing "
                                "in it is overwritten");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // `runner x.yaml | head`: a closed stdout must not kill the run halfway (records,
  // log and history would stop mid-point); writes to it just fail from then on.
  std::signal(SIGPIPE, SIG_IGN);
  // merge and submit read their own flags (output/merge.hpp, dist/submit.hpp).
  if (argc >= 2 && std::string(argv[1]) == "merge") return runner::merge_verb(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "submit") return runner::submit_verb(argc, argv);
  po::options_description flags("options");
  flags.add_options()
      ("help,h", "show this help (after a command: that command's help)")
      ("version", "print the runner version and the LibTorch and plugin API it was built with")
      ("set,s", po::value<std::vector<std::string>>()->composing(), "override a key: key.path=value (repeatable)")
      ("device", po::value<std::string>(), "cpu or cuda (default: the experiment's, else cuda when present)")
      ("out,o", po::value<std::string>(), "run directory, new or empty (default runs/<experiment>/<UTC time>)")
      ("reports", po::value<std::string>(), "also write reports into this directory (e.g. reports)")
      ("pdf", "runner report: build <reports>/writeup.pdf with latexmk")
      ("check", "runner report: re-render every committed report into a scratch copy; fail on any difference")
      ("spec", po::value<std::string>(), "runner report: render with this experiment file's report: spec")
      ("allow-dirty", "with --reports into the project's reports (the folder with renders.txt): accept records of "
                      "uncommitted changes or an unknown commit; every caption then says so")
      ("dry-run", "print the expanded points and exit")
      ("cfg", "print the resolved experiment (after --smoke and every override) and exit")
      ("filter", po::value<std::string>(), "run only the points whose label (as printed: part and axes) matches this regex")
      ("smoke", "apply the experiment's smoke: overrides (seconds on a CPU)")
      ("max-points", po::value<std::string>()->default_value(std::to_string(runner::kDefaultMaxPoints)),
       "refuse a sweep with more points than this (counted before expanding)")
      ("resume", po::value<std::string>(), "complete a crashed or killed run: run only points without a record")
      ("shard", po::value<std::string>(), "run shard I/N: the points at sweep positions p with p % N == I (runner merge joins them)")
      ("workers", po::value<int>(), "run the points on N worker processes at once (CPU runs)")
      ("gpus", po::value<std::string>(), "run the points on these GPUs at once, one worker each: all, 0-3 or 0,2")
      ("history", po::value<std::string>(), "history database for this run, or off (default: RUNNER_HISTORY, the experiment's history:, ~/.local/share/runner/history.sqlite)")
      ("plugin-path", po::value<std::vector<std::string>>()->composing(), "extra plugin directory (repeatable)")
      ("backend", po::value<std::string>(), "multi-process runs: auto (nccl for CUDA, gloo for CPU), gloo or nccl")
      ("nproc-per-node", po::value<int>(), "runner launch: number of local ranks")
      ("markdown", "runner describe: print the options as the Markdown table of the plugin's README")
      ("nnodes", po::value<int>(), "runner launch: number of nodes, one launcher each (default 1)")
      ("node-rank", po::value<int>(), "runner launch: this launcher's node, 0..nnodes-1 (default 0)")
      ("master-addr", po::value<std::string>(), "runner launch: node 0's address (default 127.0.0.1)")
      ("master-port", po::value<int>(), "runner launch: node 0's rendezvous port (default: a free one; needed with --nnodes > 1)");
  po::options_description hidden;
  hidden.add_options()("args", po::value<std::vector<std::string>>(), "command and arguments")
      ("worker-of", po::value<std::string>(), "a pool's worker: the run directory (workers.hpp)")
      ("worker-index", po::value<int>(), "a pool's worker: its index");
  po::options_description all;
  all.add(flags).add(hidden);
  po::positional_options_description positional;
  positional.add("args", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    std::cerr << "runner: unknown option " << e.get_option_name()
              << runner::suggestion(e.get_option_name(), option_names(flags)) << " (runner --help lists them)\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "runner: " << e.what() << " (runner --help)\n";
    return 2;
  }
  if (vm.count("version")) {
    std::cout << "runner " << runner::runner_version() << " (" << runner::host_build_info()
              << ", plugin API " << runner::kPluginApiVersion << ")\n";
    return 0;
  }
  const auto args = vm.count("args") ? vm["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (vm.count("help") && !args.empty() && command_help(args[0])) {
    std::cout << command_help(args[0]);
    return 0;
  }
  if (vm.count("help") && !args.empty()) {
    // `runner submit --help`: a word that is neither a command nor an experiment is
    // an error, not a question the general usage answers.
    try {
      if (!std::filesystem::exists(experiment_file(args[0])))
        throw runner::ConfigError("'" + args[0] + "': no such command or experiment file (runner --help lists the "
                                  "commands, runner list the experiments)");
    } catch (const runner::ConfigError& e) {
      runner::write_stderr_line(std::string("runner: unknown command: ") + e.what());
      return 2;
    }
  }
  if (vm.count("help") || args.empty()) {
    std::cout << kUsage << "\n" << flags;
    return args.empty() && !vm.count("help") ? 2 : 0;
  }

  try {
    check_paths(vm);
    const std::string& command = args[0];
    if (command == "list") {
      if (args.size() > 2) throw runner::ConfigError("runner list: expected at most one directory");
      return runner::list_experiments(args.size() == 2 ? args[1] : "experiments", std::cout) ? 2 : 0;
    }
    if (command == "report" && vm.count("check")) {
      if (args.size() > 1) throw runner::ConfigError("runner report --check: takes no run directory (it checks every committed report)");
      const std::filesystem::path reports_dir = vm.count("reports") ? vm["reports"].as<std::string>() : "reports";
      const std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                            ("runner-report-check-" + std::to_string(::getpid()));
      const int code = runner::check_committed_reports(reports_dir, reports_dir.parent_path().empty()
                                                                        ? std::filesystem::path("experiments")
                                                                        : reports_dir.parent_path() / "experiments",
                                                       scratch, std::cout);
      return code;
    }
    if (command == "report") {
      const bool pdf = vm.count("pdf") > 0;
      if (args.size() < 2 && !pdf)
        throw runner::ConfigError("runner report: expected a run directory, or --pdf (runner report --help)");
      // Never the project's reports/ unless asked: a quick re-render must not
      // replace committed tables.
      const std::vector<std::filesystem::path> run_dirs(args.begin() + 1, args.end());
      const std::filesystem::path reports_dir = vm.count("reports") ? std::filesystem::path(vm["reports"].as<std::string>())
                                                : !run_dirs.empty()  ? run_dirs.front() / "reports"
                                                                     : std::filesystem::path("reports");
      if (!run_dirs.empty())
        if (const int code = runner::render_reports(run_dirs, reports_dir,
                                                    vm.count("spec") ? vm["spec"].as<std::string>() : "",
                                                    vm.count("allow-dirty") > 0);
            code != 0 || !pdf)
          return code;
      const std::filesystem::path pdf_path = runner::report::build_pdf(reports_dir);
      std::cerr << "wrote " << pdf_path.string() << "\n";
      return 0;
    }

    std::vector<std::filesystem::path> extra;
    if (vm.count("plugin-path"))
      for (const auto& p : vm["plugin-path"].as<std::vector<std::string>>()) extra.emplace_back(p);
    runner::PluginRegistry registry;
    registry.scan(runner::PluginRegistry::search_path(extra));
    for (const auto& w : registry.warnings()) std::cerr << "warning: " << w << "\n";

    if (command == "plugins") {
      runner::list_plugins(registry, std::cout);
      return 0;
    }
    if (command == "describe") {
      if (args.size() != 2)
        throw runner::ConfigError("runner describe: expected <kind>/<name>, e.g. task/device_ceilings");
      if (!runner::describe_plugin(registry, args[1], std::cout, vm.count("markdown") > 0))
        throw runner::ConfigError("runner describe: no plugin '" + args[1] + "'" +
                                  runner::plugin_suggestion(registry, args[1]) + " (see `runner plugins`)");
      return 0;
    }
    const bool launch = command == "launch";
    if (launch != (vm.count("nproc-per-node") > 0)) {
      std::cerr << (launch ? "runner launch: --nproc-per-node N is required\n"
                           : "runner: --nproc-per-node belongs to `runner launch`\n") << kUsage;
      return 2;
    }
    for (const char* flag : {"nnodes", "node-rank", "master-addr", "master-port"})
      if (!launch && vm.count(flag))
        throw runner::ConfigError(std::string("--") + flag + " belongs to `runner launch` (runner launch --help)");
    // Hydra-style overrides: `runner x.yaml params.batch_size=16` is --set params.batch_size=16.
    // `runner a.yaml b.yaml ...`: more experiment files, run in turn (not with launch).
    std::vector<std::string> bare_overrides;
    std::vector<std::string> more_experiments;
    for (size_t i = launch ? 2 : 1; i < args.size(); ++i) {
      if (args[i].find('=') == std::string::npos || args[i].front() == '=') {
        if (!launch && names_experiment(args[i])) {
          more_experiments.push_back(args[i]);
          continue;
        }
        std::cerr << "runner: unexpected argument '" << args[i] << "' (after the experiment, only key.path=value overrides"
                  << (launch ? "; runner launch runs one experiment" : " or more experiment files") << ")\n" << kUsage;
        return 2;
      }
      bare_overrides.push_back(args[i]);
    }
    if (launch && args.size() < 2) {
      std::cerr << "runner: missing the experiment file\n" << kUsage;
      return 2;
    }
    for (const auto& e : registry.load_errors())
      std::cerr << "warning: skipped plugin " << e.file.string() << ": " << e.message << "\n";
    runner::RunOptions options;
    options.experiment = experiment_file(launch ? args[1] : command);
    if (vm.count("set")) options.overrides = vm["set"].as<std::vector<std::string>>();
    options.overrides.insert(options.overrides.end(), bare_overrides.begin(), bare_overrides.end());
    std::vector<std::filesystem::path> experiments = {options.experiment};
    for (const auto& more : more_experiments) experiments.push_back(experiment_file(more));
    if (vm.count("cfg")) {
      for (const auto& file : experiments) {
        const runner::ExperimentSpec exp = runner::load_experiment(file, options.overrides, vm.count("smoke") > 0);
        std::cout << runner::config_header(file, vm.count("smoke") > 0) << exp.resolved << "\n";
      }
      return 0;
    }
    if (vm.count("filter")) {
      options.filter = vm["filter"].as<std::string>();
      try {
        std::regex check(options.filter);
      } catch (const std::regex_error& e) {
        throw runner::ConfigError("--filter '" + options.filter + "': not a regular expression (" + e.what() + ")");
      }
    }
    if (vm.count("device")) options.device = vm["device"].as<std::string>();
    if (vm.count("out")) options.out = vm["out"].as<std::string>();
    if (vm.count("pdf")) throw runner::ConfigError("--pdf belongs to `runner report` (runner report --help)");
    if (vm.count("check")) throw runner::ConfigError("--check belongs to `runner report` (runner report --help)");
    if (vm.count("spec")) throw runner::ConfigError("--spec belongs to `runner report` (runner report --help)");
    if (vm.count("reports")) options.reports_dir = vm["reports"].as<std::string>();
    options.allow_dirty = vm.count("allow-dirty") > 0;
    if (vm.count("history")) options.history = vm["history"].as<std::string>();
    options.dry_run = vm.count("dry-run") > 0;
    options.smoke = vm.count("smoke") > 0;
    options.max_points = runner::parse_max_points(vm["max-points"].as<std::string>());
    if (vm.count("resume")) {
      if (vm.count("out")) throw runner::ConfigError("--resume and --out: give one; --resume continues the run it names");
      options.resume = vm["resume"].as<std::string>();
    }
    if (vm.count("shard")) {
      // A shard is 1/N of the whole sweep, so that the N shards merge into it.
      if (vm.count("filter"))
        throw runner::ConfigError("--shard and --filter: a shard is 1/N of the whole sweep; narrow the sweep with --set instead");
      options.shard = runner::parse_shard(vm["shard"].as<std::string>());
    }
    if (vm.count("workers")) options.workers = vm["workers"].as<int>();
    if (vm.count("gpus")) options.gpus = vm["gpus"].as<std::string>();
    if (vm.count("worker-of")) options.worker_of = vm["worker-of"].as<std::string>();
    if (vm.count("worker-index")) options.worker_index = vm["worker-index"].as<int>();
    options.args.assign(argv + 1, argv + argc);
    if (vm.count("backend")) options.backend = runner::checked_backend(vm["backend"].as<std::string>());
    if (launch) {
      // Each rank gets this command line without `launch` and the launcher's flags.
      runner::LaunchSpec spec;
      spec.nproc = vm["nproc-per-node"].as<int>();
      if (vm.count("nnodes")) spec.nnodes = vm["nnodes"].as<int>();
      if (vm.count("node-rank")) spec.node_rank = vm["node-rank"].as<int>();
      if (vm.count("master-addr")) spec.master_addr = vm["master-addr"].as<std::string>();
      if (vm.count("master-port")) spec.master_port = vm["master-port"].as<int>();
      bool dropped_launch = false;
      for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "launch" && !dropped_launch) {
          dropped_launch = true;
          continue;
        }
        bool launcher_flag = false;
        for (const std::string flag : {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"}) {
          if (a == flag) {
            ++i;
            launcher_flag = true;
          }
          launcher_flag = launcher_flag || a.rfind(flag + "=", 0) == 0;
        }
        if (!launcher_flag) spec.rank_args.push_back(a);
      }
      return runner::launch_local(options, registry, spec);
    }
    if (experiments.size() > 1) return runner::run_experiments(experiments, options, registry, std::cout);
    return runner::run_experiment(options, registry);
  } catch (const runner::ConfigError& e) {
    runner::write_stderr_line(std::string("runner: ") + e.what());
    return 2;
  } catch (const runner::report::SpecError& e) {
    runner::write_stderr_line(std::string("runner: ") + e.what());
    return 2;
  } catch (const YAML::Exception& e) {  // a value of the wrong kind that no check named first
    runner::write_stderr_line(std::string("runner: ") + e.what() +
                              "; that value has the wrong kind (a map or list where a name or number belongs)");
    return 2;
  } catch (const std::bad_alloc&) {
    runner::write_stderr_line("runner: out of memory (a sweep or file too large for this machine?)");
    return 1;
  } catch (const std::exception& e) {
    runner::write_stderr_line(std::string("runner: ") + e.what());
    return 1;
  }
}
