// A run directory: made for a new run, or checked and read back for --resume
// (which points already have a finished record).
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "config/experiment.hpp"
#include "config/shard.hpp"

namespace runner {

struct RunDirectory {
  std::filesystem::path path;
  bool resumed = false;
  std::set<std::pair<std::string, int>> finished;  // on resume: points that already have a record
  // The run directory's flock, held while this (or a copy) lives: no second run
  // or --resume writes the same directory at the same time.
  std::shared_ptr<const int> lock;
};

// Takes the exclusive flock of directory `dir` for as long as the returned handle
// lives; throws ConfigError naming the process that holds it (`what`: "--out" or
// "--resume", for the message).
std::shared_ptr<const int> lock_run_directory(const std::filesystem::path& dir, const std::string& what);

// A new run: `out` (must not exist, or be an empty directory), else
// runs/<experiment>/<UTC time>[-n]; writes config.yaml (plain YAML, with a header
// naming the file, --smoke and each --set) and makes artifacts/.
// A resumed run (`resume` set): the directory must hold config.yaml equal to the
// resolved document of `exp`; a point cut off while being written (a kill, a full
// disk) is dropped from results.jsonl so appends start after the last whole point.
// Either way the directory is locked (lock_run_directory). Throws ConfigError.
// `shard`: a new run's config.yaml names it in its header; a resumed run must be that
// same shard (or, without one, the whole sweep).
RunDirectory prepare_run_directory(const ExperimentSpec& exp, const std::vector<std::string>& overrides, bool smoke,
                                   const std::filesystem::path& out, const std::filesystem::path& resume,
                                   const std::optional<Shard>& shard = std::nullopt);

// config.yaml's text without its leading comment lines: the resolved document.
std::string stored_document(const std::string& config_text);

// (part, point index) of every point with a finished record (any status but
// `interrupted`, `error` and `timeout`, which --resume runs again); a point not
// written whole is skipped.
std::set<std::pair<std::string, int>> finished_points(const std::filesystem::path& results_jsonl);

}  // namespace runner
