// Overrides of an experiment document: its own `smoke:` map (--smoke) and `--set
// key.path=value`. Paths are dotted; list entries are addressed by index or by their
// `name`; sweep axes are flat dotted keys ("sweep.model.size"); a value set over a
// swept axis replaces the axis (a note on stderr says so).
#pragma once
#include <string>

#include "config/config_load.hpp"

namespace runner {

// Sets `value` at dotted `path` in `root`, creating maps as needed. Keys that
// themselves contain dots (sweep axes) are matched greedily.
void set_path(YAML::Node root, const std::string& path, const YAML::Node& value);

// Applies the document's `smoke:` overrides (ConfigError when it has none).
void apply_smoke(ExperimentDocument& doc);

// Applies one `--set` text ("path=value", the value parsed as YAML) and records the
// path in doc.source.overridden, so later errors about it name the --set.
void apply_override(ExperimentDocument& doc, const std::string& set_text);

}  // namespace runner
