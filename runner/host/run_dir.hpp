// A run directory: made for a new run, or checked and read back for --resume
// (which points already have a finished record).
#pragma once
#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "config.hpp"

namespace runner {

struct RunDirectory {
  std::filesystem::path path;
  bool resumed = false;
  std::set<std::pair<std::string, int>> finished;  // on resume: points that already have a record
};

// A new run: `out` (must not exist, or be an empty directory), else
// runs/<experiment>/<UTC time>[-n]; writes config.yaml (plain YAML, with a header
// naming the file, --smoke and each --set) and makes artifacts/.
// A resumed run (`resume` set): the directory must hold config.yaml equal to the
// resolved document of `exp`; a record cut off by a kill is dropped from
// results.jsonl so appends start on a fresh line. Throws ConfigError.
RunDirectory prepare_run_directory(const Experiment& exp, const std::vector<std::string>& overrides, bool smoke,
                                   const std::filesystem::path& out, const std::filesystem::path& resume);

// (part, point index) of every point with a finished record (any status but
// `interrupted`); a truncated last record is skipped.
std::set<std::pair<std::string, int>> finished_points(const std::filesystem::path& results_jsonl);

}  // namespace runner
