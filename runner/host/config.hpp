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

#include "validate.hpp"

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

// The YAML document in `file` (e.g. a run's stored config.yaml); an unreadable file or a
// syntax error is one ConfigError naming the file (and line:column).
YAML::Node load_yaml_file(const std::filesystem::path& file);

// Sets `value` at dotted `path` in `root`, creating maps as needed. Keys that
// themselves contain dots (sweep axes) are matched greedily.
void set_path(YAML::Node root, const std::string& path, const YAML::Node& value);

// A deep copy that shares no node, so emitting it writes every value where it is
// used instead of YAML anchors and aliases (&1, *1).
YAML::Node plain_copy(const YAML::Node& node);
// The resolved document as it is stored in a run's config.yaml (no anchors).
std::string resolved_text(const YAML::Node& document);
// The first lines of config.yaml: "# resolved from <file>[ with --smoke]", and
// whether such a first line says --smoke.
std::string config_header(const std::filesystem::path& experiment_file, bool smoke);
bool config_header_marks_smoke(const std::string& first_line);

// Experiment and include files are YAML of a few KiB: a larger one (or /dev/zero) is
// refused before it is read, and so is anything but a regular file (a FIFO hangs).
inline constexpr std::uintmax_t kMaxExperimentFileBytes = 16u << 20;
void check_experiment_file(const std::filesystem::path& file);

// Throws ConfigError unless `text` is usable as one directory name (no '/', '..',
// absolute paths or control characters). `what` starts the message.
void check_path_component(const std::string& text, const std::string& what);

// The parts of an experiment as nodes with top-level defaults merged in.
struct PartNode {
  std::string name;
  YAML::Node node;  // has task, params, sweep, measure, precision, seed, profilers
};
// The parts to run; with include_disabled also those marked `enabled: false`
// (`--set parts.<name>.enabled=false` leaves a part out of one run).
std::vector<PartNode> experiment_parts(const Experiment& exp, bool include_disabled = false);

}  // namespace runner
