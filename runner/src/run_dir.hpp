// Reading a run directory back: what a re-render must say about the run (smoke,
// planned points) and which points already have a finished record (--resume).
#pragma once
#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "report/report.hpp"

namespace runner {

// The first lines of config.yaml: "# resolved from <file>[ with --smoke]".
std::string config_header(const std::filesystem::path& experiment_file, bool smoke);

// Smoke flag from config.yaml's header, planned points counted from its sweeps
// (0 when config.yaml cannot be read).
report::RunSummary run_summary(const std::filesystem::path& run_dir);

// (part, point index) of every point with a finished record (any status but
// `interrupted`); a truncated last record is skipped.
std::set<std::pair<std::string, int>> finished_points(const std::filesystem::path& results_jsonl);

}  // namespace runner
