// The host's verbs: run an experiment, re-render reports from a run directory,
// list plugins, describe one plugin's options.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace runner {

class PluginRegistry;

struct RunOptions {
  std::filesystem::path experiment;
  std::vector<std::string> overrides;  // --set key.path=value
  std::string device;                  // "", "cpu", "cuda"
  std::filesystem::path out;           // run directory; default runs/<name>/<UTC timestamp>
  std::filesystem::path reports_dir;   // also write reports here (e.g. "reports"); always into <run>/reports
  std::string backend;                 // "", "auto", "gloo", "nccl" (multi-process runs)
  std::string history;                 // --history FILE or "off"; default: RUNNER_HISTORY, `history:`, XDG data dir
  bool dry_run = false;
  bool smoke = false;
  std::size_t max_points = 100000;     // refuse larger sweeps (counted before expanding)
  std::filesystem::path resume;        // --resume: a run directory to complete
};

// Returns the process exit code: 0 when every point is ok or oom, 1 otherwise.
int run_experiment(const RunOptions& options, const PluginRegistry& registry);
// `runner launch`: checks the experiment once (as run_experiment would, for a
// world of `nproc` ranks), then starts and supervises `nproc` local ranks that
// run `rank_args`. Returns the first failed rank's exit code, else 0.
int launch_local(const RunOptions& options, const PluginRegistry& registry, int nproc,
                 const std::vector<std::string>& rank_args);
// Re-renders the reports of finished runs from their stored configs and records;
// several runs of one experiment (same report spec) merge into one report. A non-empty
// spec_file (an experiment YAML of the same experiment) supplies the report spec instead,
// so records taken before a table or column was added render with it.
int render_reports(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& reports_dir,
                   const std::filesystem::path& spec_file = {});

}  // namespace runner
