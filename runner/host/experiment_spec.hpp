// An experiment file: what runs (one or more parts, each a task with fixed
// params and sweep axes), how it is measured, and which tables it reports.
//
// Top-level keys: experiment, description, device, seed, precision, measure,
// profilers, task, params, sweep, parts, smoke, report. A file without `parts`
// is one part named "main" built from task/params/sweep. Part entries override
// the top-level seed/precision/measure/profilers.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config_load.hpp"

namespace runner {

struct Experiment {
  std::filesystem::path file;
  std::string name;
  YAML::Node document;  // after --smoke and --set were applied
  SourceMap source;
};

// Loads `file`, applies the document's `smoke:` overrides when `smoke` is set,
// then each "path=value" of `overrides` (YAML-parsed values; paths are dotted,
// list entries addressed by index or by their `name`). Checks top-level keys.
Experiment load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                           bool smoke);

// The same from the file's text; `file` names it in messages.
Experiment load_experiment_text(const std::string& text, const std::filesystem::path& file,
                                const std::vector<std::string>& overrides, bool smoke);

// The loaded document with the overrides applied: --smoke, then each --set in order.
Experiment resolve_experiment(ExperimentDocument loaded, const std::vector<std::string>& overrides, bool smoke);

// The parts of an experiment as nodes with top-level defaults merged in.
struct PartNode {
  std::string name;
  YAML::Node node;  // has task, params, sweep, measure, precision, seed, profilers
};
// The parts to run; with include_disabled also those marked `enabled: false`
// (`--set parts.<name>.enabled=false` leaves a part out of one run).
std::vector<PartNode> experiment_parts(const Experiment& exp, bool include_disabled = false);

}  // namespace runner
