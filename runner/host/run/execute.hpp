// The host's two run verbs: run an experiment (`runner X.yaml`, one rank of a
// multi-process run too) and start local ranks (`runner launch`). Re-rendering a run's
// reports is output/run_reports.hpp; listing and describing plugins, config/catalog.hpp.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "config/shard.hpp"

namespace runner {

struct LaunchSpec;

class PluginRegistry;

// The command line of a run, parsed and checked once (cli/main.cpp): each flag's value
// has its type here, and a bad one was refused naming the flag before anything loads.
struct RunOptions {
  std::filesystem::path experiment;
  std::vector<std::string> overrides;  // --set key.path=value
  std::string device;                  // "", "cpu", "cuda"
  std::filesystem::path out;           // run directory; default runs/<name>/<UTC timestamp>
  std::filesystem::path reports_dir;   // also write reports here (e.g. "reports"); always into <run>/reports
  std::string backend = "auto";        // "auto", "gloo", "nccl" (multi-process runs), checked when parsed
  std::string history;                 // --history FILE or "off"; default: RUNNER_HISTORY, `history:`, XDG data dir
  std::string filter;                  // --filter REGEX: only points whose label ("part axis=value ...") matches
  bool dry_run = false;
  bool smoke = false;
  bool allow_dirty = false;            // --allow-dirty: an unclean commit may fill the project's reports
  std::size_t max_points = 100000;     // refuse larger sweeps (counted before expanding)
  std::filesystem::path resume;        // --resume: a run directory to complete
  std::optional<Shard> shard;          // --shard I/N: only that 1/N of the sweep (config/shard.hpp)
  int workers = -1;                    // --workers N (-1: not given): points spread over N processes (workers.hpp)
  std::string gpus;                    // --gpus LIST|all: one worker per GPU
  std::filesystem::path worker_of;     // set in a worker the pool started: the run's directory
  int worker_index = -1;
  std::vector<std::string> args;       // the command line after the program name (a pool's workers reuse it)
};

// Returns the process exit code: 0 when every point is ok or oom, 1 otherwise.
// `run_dir`, when given, receives the run directory once it exists (not for --dry-run).
int run_experiment(const RunOptions& options, const PluginRegistry& registry,
                   std::filesystem::path* run_dir = nullptr);
// `runner launch`: checks the experiment once (as run_experiment would, for a
// world of nnodes x nproc ranks), then starts and supervises this node's `nproc`
// ranks, which run `rank_args`. Returns the first failed rank's exit code, else 0.
int launch_local(const RunOptions& options, const PluginRegistry& registry, const LaunchSpec& spec);

}  // namespace runner
