// Scheduled regression sweeps through the system's own scheduler (no daemon of
// ours): a systemd user timer where a user systemd runs, else a crontab entry,
// or with --slurm an sbatch script that resubmits itself with --begin. Each
// firing runs `runner schedule --run NAME`: the sweep, a compare against the
// baseline (default last-good), the run's verdict in the history, one line in
// the regression log and compare.md/.json in the run directory.
// Definitions live in $XDG_DATA_HOME/runner/schedules/<name>.json
// (RUNNER_SCHEDULE_DIR overrides). RUNNER_CRONTAB names a file to use instead of
// the user's crontab (tests).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace runner::history {

struct Schedule {
  std::string name, experiment, workdir, runner;  // absolute paths
  std::string every, at = "02:00", compare_to = "last-good";
  long every_seconds = 0;
  std::vector<std::string> overrides, sbatch_args;
  std::vector<std::string> plugin_paths;      // --plugin-path of every run (absolute)
  std::map<std::string, std::string> env;     // the installing shell's RUNNER_*, PATH, CUDA_* ... (see captured_environment)
  std::string device, history, log, backend;  // backend: systemd, cron or slurm
  std::string output;  // cron: where each firing's own output is appended (never /dev/null)
  bool smoke = false;
  double threshold = 0.05, alpha = 0.05;
};

nlohmann::json to_json(const Schedule& s);
// The variables of `environ` a scheduled firing needs and a scheduler does not pass
// on: RUNNER_*, CUDA_*, NCCL_*, TORCH_*, PYTORCH_*, OMP_*, PATH, LD_LIBRARY_PATH,
// PYTHONPATH and VIRTUAL_ENV. Each firing sets them before running the sweep.
std::map<std::string, std::string> captured_environment(char** environ);
Schedule schedule_from_json(const nlohmann::json& j);

// The calendar forms of an interval; throws std::invalid_argument naming the
// intervals cron and systemd can express when `every` is not one of them.
std::string cron_times(long every_seconds, const std::string& at);
std::string systemd_on_calendar(long every_seconds, const std::string& at);

// Text of what each backend installs (also printed by --dry-run).
std::string cron_line(const Schedule& s);
std::string systemd_service(const Schedule& s);
std::string systemd_timer(const Schedule& s);
std::string sbatch_script(const Schedule& s, const std::string& script_path);

}  // namespace runner::history
