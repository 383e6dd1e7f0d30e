// Turns YAML option trees into typed Params, checking each key against the options
// the plugins declare. Errors carry file:line:col, the dotted key and, for names,
// the closest valid one.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/errors.hpp"
#include "runner/params.hpp"
#include "runner/plugin.hpp"

namespace runner {

class PluginRegistry;

// Where a YAML node came from, for error messages.
struct SourceMap {
  std::string file;                                // the experiment file
  std::map<std::string, std::string> overridden;  // dotted path -> "--set a.b=c"
  // Documents read through `include:` and their files: a node found in one of them is
  // reported at its own file's line and column.
  std::vector<std::pair<YAML::Node, std::string>> included;
  std::string where(const YAML::Node& node, const std::string& path) const;
};

// An option value or map of options as the experiment writes it (YAML, with its line
// and column for messages): what resolve_options turns into typed Params.
using OptionTree = YAML::Node;

// Values that replace entries of `node` by dotted path (a sweep point's axis values).
using PathValues = std::map<std::string, YAML::Node>;

// Validates `node` (a map, or null for all defaults) against `options` and returns
// the resolved Params with defaults filled in. `path` prefixes keys in messages
// ("params"). Axis values in `point` (paths relative to `path`) take precedence;
// every entry of `point` must name a declared option.
Params resolve_options(const YAML::Node& node, const std::vector<OptionSpec>& options,
                       const PluginRegistry& registry, const std::string& path,
                       const SourceMap& source, const PathValues& point = {});

// Convenience for tests and tools: all defaults of a plugin, with `yaml` on top.
Params resolve_plugin_options(const PluginRegistry& registry, PluginKind kind,
                              const std::string& name, const std::string& yaml = "");

}  // namespace runner
