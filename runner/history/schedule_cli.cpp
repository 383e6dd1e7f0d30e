// `runner schedule`: install, list, remove, and (from the scheduler) run one
// scheduled sweep. See schedule.hpp for the backends.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <array>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "history/command_line.hpp"
#include "history/shell.hpp"
#include "history/cli.hpp"
#include "history/compare.hpp"
#include "history/schedule.hpp"
#include "history/store.hpp"
#include "history/time_text.hpp"

namespace runner::history {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: runner schedule <experiment.yaml> --every 24h [--at 02:00] [--compare-to last-good]\n"
    "                       [--set k=v]... [--device cpu|cuda] [--smoke] [--plugin-path DIR]... [--name N]\n"
    "                       [--slurm [--sbatch-arg A]...] [--cron] [--dry-run]\n"
    "       runner schedule --list\n"
    "       runner schedule --remove NAME\n"
    "       runner schedule --run NAME    (what the scheduler calls: sweep, compare, log one line)\n"
    "Each run gets the --plugin-path directories and the environment of the shell that installed the\n"
    "schedule (RUNNER_*, PATH, LD_LIBRARY_PATH, PYTHONPATH, VIRTUAL_ENV, CUDA_*, NCCL_*, TORCH_*, OMP_*);\n"
    "its full output is kept in runs/<name>/<time>.log beside the run directory.\n";

fs::path data_dir() {
  if (const char* d = std::getenv("XDG_DATA_HOME"); d && *d) return fs::path(d) / "runner";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".local" / "share" / "runner";
}

fs::path schedule_dir() {
  if (const char* d = std::getenv("RUNNER_SCHEDULE_DIR"); d && *d) return d;
  return data_dir() / "schedules";
}

// Runs a shell command; returns its exit code and stdout.
int shell(const std::string& cmd, std::string* output = nullptr) { return run_shell(cmd, output); }

bool have(const std::string& tool) { return shell("command -v " + tool + " >/dev/null 2>&1") == 0; }

bool user_systemd_running() {
  return fs::exists("/run/systemd/system") && have("systemctl") &&
         shell("systemctl --user show-environment >/dev/null 2>&1") == 0;
}

// The user's crontab, or the file RUNNER_CRONTAB names.
std::string read_crontab() {
  if (const char* f = std::getenv("RUNNER_CRONTAB"); f && *f) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (!have("crontab"))
    throw std::runtime_error("no crontab command here: install cron (Debian: apt-get install cron), or use --slurm");
  std::string out;
  shell("crontab -l 2>/dev/null", &out);  // exit 1 with "no crontab for user" is an empty table
  return out;
}

void write_crontab(const std::string& text) {
  if (const char* f = std::getenv("RUNNER_CRONTAB"); f && *f) {
    std::ofstream(f) << text;
    return;
  }
  const fs::path tmp = schedule_dir() / ".crontab.new";
  std::ofstream(tmp) << text;
  std::string out;
  if (shell("crontab " + shell_quote(tmp.string()) + " 2>&1", &out) != 0)
    throw std::runtime_error("crontab refused the new table: " + out);
  fs::remove(tmp);
}

// Whether a cron daemon runs here: a crontab line without one never fires.
bool cron_daemon_running() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (comm >> name && (name == "cron" || name == "crond" || name == "cronie")) return true;
  }
  return false;
}

std::string without_entry(const std::string& table, const std::string& name) {
  std::istringstream in(table);
  std::string line, out;
  const std::string marker = "# runner:" + name;
  while (std::getline(in, line))
    if (line.size() < marker.size() || line.compare(line.size() - marker.size(), marker.size(), marker) != 0)
      out += line + "\n";
  return out;
}

fs::path definition_file(const std::string& name) { return schedule_dir() / (name + ".json"); }

Schedule load(const std::string& name) {
  const fs::path file = definition_file(name);
  std::ifstream in(file);
  if (!in) throw std::runtime_error("no schedule '" + name + "' (" + file.string() + "); see `runner schedule --list`");
  return schedule_from_json(nlohmann::json::parse(in));
}

fs::path systemd_dir() {
  if (const char* c = std::getenv("XDG_CONFIG_HOME"); c && *c) return fs::path(c) / "systemd" / "user";
  return fs::path(std::getenv("HOME") ? std::getenv("HOME") : ".") / ".config" / "systemd" / "user";
}

void install(const Schedule& s, bool dry_run) {
  const fs::path script = schedule_dir() / (s.name + ".sbatch");
  if (s.backend == "cron") {
    // Refused before the entry is printed, so neither an install nor a --dry-run shows an
    // entry that could never be written.
    if (!std::getenv("RUNNER_CRONTAB") && !have("crontab"))
      throw std::invalid_argument("no crontab command here, so a cron schedule cannot be installed: install cron "
                                  "(Debian: apt-get install cron), or schedule with --slurm");
    const std::string line = cron_line(s);
    std::cout << "crontab entry" << (std::getenv("RUNNER_CRONTAB") ? std::string(" (in ") + std::getenv("RUNNER_CRONTAB") + ")" : "")
              << ":\n" << line << "\n";
    if (!dry_run) write_crontab(without_entry(read_crontab(), s.name) + line + "\n");
    if (!std::getenv("RUNNER_CRONTAB") && !cron_daemon_running())
      std::cerr << "warning: no cron daemon runs on this machine, so the entry will not fire until one does "
                   "(Debian: `systemctl enable --now cron`, or `service cron start`)\n";
  } else if (s.backend == "systemd") {
    const fs::path dir = systemd_dir();
    const std::string unit = "runner-" + s.name;
    std::cout << (dir / (unit + ".service")).string() << ":\n" << systemd_service(s) << "\n"
              << (dir / (unit + ".timer")).string() << ":\n" << systemd_timer(s) << "\n";
    if (!dry_run) {
      fs::create_directories(dir);
      std::ofstream(dir / (unit + ".service")) << systemd_service(s);
      std::ofstream(dir / (unit + ".timer")) << systemd_timer(s);
      std::string out;
      if (shell("systemctl --user daemon-reload 2>&1 && systemctl --user enable --now " + unit + ".timer 2>&1", &out) != 0)
        throw std::runtime_error("systemctl could not enable " + unit + ".timer: " + out);
      std::cout << "enabled " << unit << ".timer (runs while you are logged in; `loginctl enable-linger` "
                << "keeps it running after logout)\n";
    }
  } else {
    std::cout << script.string() << ":\n" << sbatch_script(s, script.string()) << "\n";
    if (!dry_run) {
      if (!have("sbatch")) throw std::runtime_error("no sbatch command here: --slurm needs a Slurm client");
      std::ofstream(script) << sbatch_script(s, script.string());
      fs::permissions(script, fs::perms::owner_exec, fs::perm_options::add);
      // The first sweep starts at the next --at time (Slurm reads HH:MM as today,
      // or tomorrow once passed); the job then resubmits itself every interval.
      const std::string begin = s.every_seconds >= 86400 ? s.at : "now";
      std::string out;
      if (shell("sbatch --parsable --begin=" + begin + " " + shell_quote(script.string()) + " 2>&1", &out) != 0)
        throw std::runtime_error("sbatch failed: " + out);
      std::cout << "submitted Slurm job " << out;
    }
  }
}

void uninstall(const Schedule& s) {
  if (s.backend == "cron") {
    write_crontab(without_entry(read_crontab(), s.name));
  } else if (s.backend == "systemd") {
    const std::string unit = "runner-" + s.name;
    shell("systemctl --user disable --now " + unit + ".timer >/dev/null 2>&1");
    fs::remove(systemd_dir() / (unit + ".service"));
    fs::remove(systemd_dir() / (unit + ".timer"));
    shell("systemctl --user daemon-reload >/dev/null 2>&1");
  } else {
    fs::remove(schedule_dir() / (s.name + ".sbatch"));  // first: a running job then cannot resubmit
    if (have("scancel")) shell("scancel --name=" + shell_quote("runner-" + s.name) + " >/dev/null 2>&1");
  }
}

std::string next_firing(const Schedule& s) {
  std::string out;
  if (s.backend == "systemd") {
    shell("systemctl --user show -p NextElapseUSecRealtime --value runner-" + s.name + ".timer 2>/dev/null", &out);
  } else if (s.backend == "slurm") {
    shell("squeue -h --name=" + shell_quote("runner-" + s.name) + " -o '%i %T begin %S' 2>/dev/null", &out);
  } else {
    try {
      std::istringstream in(read_crontab());
      for (std::string line; std::getline(in, line);)
        if (line.find("# runner:" + s.name) != std::string::npos) out = "cron " + line.substr(0, line.find(" cd "));
    } catch (const std::exception&) {
    }
    // The entry is a rule, not a time: without a daemon it never fires.
    if (!out.empty() && !std::getenv("RUNNER_CRONTAB") && !cron_daemon_running())
      out += " (no cron daemon runs here: it will not fire)";
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out.empty() ? "NOT INSTALLED (run `runner schedule --remove` and schedule again)" : out;
}

std::string last_log_line(const Schedule& s) {
  std::ifstream in(s.log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find(" " + s.name + " ") != std::string::npos) last = line;
  return last;
}

// Appends one line with a single write() on an O_APPEND file: concurrent
// schedules never interleave within a line.
void append_log(const std::string& file, const std::string& line) {
  fs::create_directories(fs::path(file).parent_path());
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw std::runtime_error("cannot open regression log " + file);
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw std::runtime_error("cannot write regression log " + file);
  std::cout << line << "\n";
}

// The last non-empty line of a file: a sweep's own one-line error.
std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

int run_scheduled(const std::string& name) {
  const Schedule s = load(name);
  fs::current_path(s.workdir);
  // cron and systemd start with an almost empty environment: the installing
  // shell's plugin path, venv and CUDA settings come back here.
  for (const auto& [key, value] : s.env) setenv(key.c_str(), value.c_str(), 1);
  std::string stamp = utc_now();
  for (char& c : stamp)
    if (c == ':' || c == '-') c = 0;
  stamp.erase(std::remove(stamp.begin(), stamp.end(), '\0'), stamp.end());
  fs::path run_dir = fs::path(s.workdir) / "runs" / s.name / stamp;
  for (int n = 2; fs::exists(run_dir); ++n) run_dir = run_dir.parent_path() / (stamp + "-" + std::to_string(n));
  std::string cmd = shell_quote(s.runner) + " " + shell_quote(s.experiment) + " --out " + shell_quote(run_dir.string()) +
                    " --history " + shell_quote(s.history);
  for (const auto& o : s.overrides) cmd += " --set " + shell_quote(o);
  for (const auto& p : s.plugin_paths) cmd += " --plugin-path " + shell_quote(p);
  if (!s.device.empty()) cmd += " --device " + s.device;
  if (s.smoke) cmd += " --smoke";
  const std::string prefix = utc_now() + " " + s.name + " ";
  // The sweep's whole output, kept beside its run directory: a sweep refused
  // before it starts has no run directory (nor log.txt) to look in.
  const fs::path output = run_dir.string() + ".log";
  fs::create_directories(run_dir.parent_path());
  std::cout << "schedule " << s.name << ": " << cmd << "\n" << std::flush;
  const int status = std::system((cmd + " >" + shell_quote(output.string()) + " 2>&1").c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream in(output);
    std::cout << in.rdbuf() << std::flush;
  }
  if (code == 2 || !fs::exists(run_dir / "results.jsonl")) {
    const std::string error = last_line(output);
    append_log(s.log, prefix + "ERROR the sweep did not run (exit " + std::to_string(code) + ")" +
                          (error.empty() ? "" : ": " + error) + "; output in " + output.string());
    return 2;
  }
  HistoryStore store(s.history);
  const auto run = store.run_by_dir(run_dir);
  CompareOptions o;
  o.threshold = s.threshold;
  o.alpha = s.alpha;
  o.only_changed = false;
  std::string line;
  bool regression = false;
  try {
    Side b = resolve_side(run_dir.string(), &store, nullptr, "", o);
    Side a;
    try {
      a = resolve_side(s.compare_to, &store, &b, "", o);
    } catch (const std::runtime_error& e) {
      // No earlier run with any of these points: the first sweep of this
      // configuration. A named baseline (run:ID, a commit) that lacks them is
      // an error below.
      if (!is_relative_query(s.compare_to)) throw;
      line = std::string("ok run ") + (run ? std::to_string(run->id) : "?") + ", no baseline (" + e.what() + ")";
    }
    if (line.empty()) {
      add_lookback(o, store, b);
      const Comparison c = compare(std::move(a), std::move(b), o);
      regression = c.regression();
      {
        std::ofstream json(run_dir / "compare.json");
        write_json(c, json);
      }
      std::ofstream md(run_dir / "compare.md");
      render_markdown(c, md);
      std::string bases;
      for (const RunInfo& base : c.a.runs)
        bases += (bases.empty() ? "" : ", ") + std::string("run ") + std::to_string(base.id) + " (" + base.git_commit + ")";
      line = std::string(regression ? "REGRESSION" : "ok") + " run " + (run ? std::to_string(run->id) : "?") + " vs " +
             s.compare_to + " = " + bases + ": " + verdict_counts(c) + "; report " + (run_dir / "compare.md").string();
      if (run) store.record_compare(run->id, s.compare_to + " = " + bases, regression, verdict_counts(c));
    } else if (run) {
      store.set_verdict(run->id, "ok");
    }
  } catch (const std::runtime_error& e) {
    append_log(s.log, prefix + "ERROR run " + (run ? std::to_string(run->id) : "?") + " vs " + s.compare_to + ": " +
                          e.what());
    return 2;
  }
  if (code != 0) line += "; some points failed (exit " + std::to_string(code) + "), see " + output.string();
  append_log(s.log, prefix + line);
  return regression || code != 0 ? 1 : 0;
}

}  // namespace

int schedule_command(const std::vector<std::string>& args, const std::string& runner_exe) {
  po::options_description flags("schedule options");
  flags.add_options()("help,h", "show this help")
      ("every", po::value<std::string>(), "interval: 24h, 12h, 1h, 30m, 7d (cron/systemd: calendar-aligned)")
      ("at", po::value<std::string>()->default_value("02:00"), "local time of day for daily or longer intervals")
      ("compare-to", po::value<std::string>()->default_value("last-good"), "baseline: last-good, last, run:ID or a commit")
      ("set,s", po::value<std::vector<std::string>>()->composing(), "override passed to each run (repeatable)")
      ("device", po::value<std::string>(), "cpu or cuda")
      ("smoke", "run with the experiment's smoke: overrides")
      ("plugin-path", po::value<std::vector<std::string>>()->composing(), "plugin directory passed to each run (repeatable)")
      ("name", po::value<std::string>(), "schedule name (default: the experiment file's name)")
      ("history", po::value<std::string>(), "history database the runs go to (default: as for runs)")
      ("log", po::value<std::string>(), "regression log (default ~/.local/share/runner/regressions.log)")
      ("threshold", po::value<double>()->default_value(0.05, "0.05"), "compare: relative noise threshold")
      ("alpha", po::value<double>()->default_value(0.05, "0.05"), "compare: significance level")
      ("slurm", "install as a self-resubmitting sbatch job")
      ("sbatch-arg", po::value<std::vector<std::string>>()->composing(), "extra #SBATCH line, e.g. --gres=gpu:1")
      ("cron", "use crontab even where systemd runs")
      ("dry-run", "print what would be installed, install nothing")
      ("list", "list installed schedules")
      ("remove", po::value<std::string>(), "uninstall a schedule")
      ("run", po::value<std::string>(), "run one scheduled sweep now (what the scheduler calls)");
  ParsedCommandLine parsed;
  int code = 0;
  if (!parse_command_line(args, flags, "schedule", kUsage, parsed, code)) return code;
  const po::variables_map& vm = parsed.vm;
  const std::vector<std::string>& positional = parsed.positional;
  try {
    if (vm.count("run")) return run_scheduled(vm["run"].as<std::string>());
    if (vm.count("list")) {
      if (!fs::exists(schedule_dir())) {
        std::cout << "(no schedules)\n";
        return 0;
      }
      int n = 0;
      for (const auto& e : fs::directory_iterator(schedule_dir())) {
        if (e.path().extension() != ".json") continue;
        const Schedule s = load(e.path().stem().string());
        std::cout << s.name << ": " << s.experiment << " every " << s.every << " via " << s.backend
                  << ", compare to " << s.compare_to << "\n  next: " << next_firing(s) << "\n  log: " << s.log << "\n";
        if (!s.output.empty()) std::cout << "  firing output: " << s.output << "\n";
        if (!s.plugin_paths.empty()) {
          std::cout << "  plugin path:";
          for (const auto& p : s.plugin_paths) std::cout << " " << p;
          std::cout << "\n";
        }
        if (const std::string last = last_log_line(s); !last.empty()) std::cout << "  last: " << last << "\n";
        ++n;
      }
      if (!n) std::cout << "(no schedules)\n";
      return 0;
    }
    if (vm.count("remove")) {
      const Schedule s = load(vm["remove"].as<std::string>());
      uninstall(s);
      fs::remove(definition_file(s.name));
      std::cout << "removed schedule " << s.name << " (" << s.backend << "); its runs stay in the history\n";
      return 0;
    }
    if (positional.size() != 1 || !vm.count("every")) {
      std::cerr << "runner schedule: expected one experiment file and --every\n" << kUsage;
      return 2;
    }
    Schedule s;
    s.experiment = fs::absolute(positional[0]).lexically_normal().string();
    if (!fs::exists(s.experiment)) {
      std::cerr << "runner schedule: " << positional[0] << ": no such experiment file\n";
      return 2;
    }
    s.name = vm.count("name") ? vm["name"].as<std::string>() : fs::path(positional[0]).stem().string();
    if (s.name.empty() || s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos) {
      std::cerr << "runner schedule: --name '" << s.name << "': use letters, digits, - and _\n";
      return 2;
    }
    s.workdir = fs::current_path().string();
    s.runner = runner_exe;
    s.every = vm["every"].as<std::string>();
    s.every_seconds = parse_duration_seconds(s.every, "--every");
    s.at = vm["at"].as<std::string>();
    s.compare_to = vm["compare-to"].as<std::string>();
    if (vm.count("set")) s.overrides = vm["set"].as<std::vector<std::string>>();
    if (vm.count("sbatch-arg")) s.sbatch_args = vm["sbatch-arg"].as<std::vector<std::string>>();
    if (vm.count("device")) s.device = vm["device"].as<std::string>();
    if (vm.count("plugin-path"))
      for (const auto& dir : vm["plugin-path"].as<std::vector<std::string>>()) {
        if (!fs::is_directory(dir)) {
          std::cerr << "runner schedule: --plugin-path " << dir << ": no such directory\n";
          return 2;
        }
        s.plugin_paths.push_back(fs::absolute(dir).lexically_normal().string());
      }
    s.env = captured_environment(environ);
    s.smoke = vm.count("smoke") > 0;
    s.threshold = vm["threshold"].as<double>();
    s.alpha = vm["alpha"].as<double>();
    const fs::path history = resolve_history_path(vm.count("history") ? vm["history"].as<std::string>() : "", "");
    if (history.empty()) {
      std::cerr << "runner schedule: the history is off; scheduled compares need it (--history FILE)\n";
      return 2;
    }
    s.history = fs::absolute(history).string();
    s.log = fs::absolute(vm.count("log") ? fs::path(vm["log"].as<std::string>()) : data_dir() / "regressions.log").string();
    s.backend = vm.count("slurm") ? "slurm" : (!vm.count("cron") && user_systemd_running()) ? "systemd" : "cron";
    if (s.backend == "cron") s.output = fs::absolute(schedule_dir() / (s.name + ".cron.log")).string();
    // Fail on an interval the backend cannot express before touching anything.
    if (s.backend == "cron") cron_times(s.every_seconds, s.at);
    if (s.backend == "systemd") systemd_on_calendar(s.every_seconds, s.at);
    if (fs::exists(definition_file(s.name)) && !vm.count("dry-run")) {
      std::cerr << "runner schedule: a schedule '" << s.name << "' exists; `runner schedule --remove " << s.name
                << "` first, or pick --name\n";
      return 2;
    }
    const bool dry_run = vm.count("dry-run") > 0;
    if (!dry_run) {
      fs::create_directories(schedule_dir());
      std::ofstream(definition_file(s.name)) << to_json(s).dump(2) << "\n";
    }
    try {
      install(s, dry_run);
    } catch (...) {
      if (!dry_run) fs::remove(definition_file(s.name));
      throw;
    }
    std::string carried;
    for (const auto& [key, value] : s.env) carried += (carried.empty() ? "" : " ") + key;
    std::cout << (dry_run ? "would install" : "installed") << " schedule " << s.name << " (" << s.backend
              << "): each run compares with " << s.compare_to << " and appends one line to " << s.log
              << "\neach run gets this shell's " << (carried.empty() ? "(nothing)" : carried) << "\n";
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "runner schedule: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "runner schedule: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace runner::history
