// What a plugin shared library exports, and what the host needs to know about it.
//
// A plugin .so defines one manifest with RUNNER_PLUGIN(make_manifest). The host
// reads runner_plugin_api_version() first and only touches the manifest when the
// version matches, so a plugin built against another API is skipped, not crashed on.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/params.hpp"

namespace runner {

// Bump when any public header changes layout or virtual interface.
inline constexpr int kPluginApiVersion = 3;

enum class PluginKind { Task, Model, Attention, Optimizer, Ddp, Profiler };
const char* to_string(PluginKind kind);
bool parse_plugin_kind(const std::string& text, PluginKind& out);

enum class OptionType {
  Bool, Int, Float, String, Enum,     // scalars; Enum is a String from `choices`
  IntList, FloatList, StringList,     // YAML sequences of scalars
  Plugin,                             // a nested plugin of `plugin_kind`: a name or {name: ..., options...}
};
const char* to_string(OptionType type);

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::String;
  Value default_value;  // empty: the option is required
  std::string help;
  std::vector<std::string> choices;  // Enum only
  PluginKind plugin_kind = PluginKind::Model;  // Plugin only
};

// Builders so a manifest reads like a table of options.
OptionSpec opt_bool(std::string name, bool def, std::string help);
OptionSpec opt_int(std::string name, Value def, std::string help);
OptionSpec opt_float(std::string name, Value def, std::string help);
OptionSpec opt_string(std::string name, Value def, std::string help);
OptionSpec opt_enum(std::string name, std::vector<std::string> choices, Value def, std::string help);
OptionSpec opt_list(std::string name, OptionType list_type, Value def, std::string help);
OptionSpec opt_plugin(std::string name, PluginKind kind, Value def, std::string help);

class Context;

// Every plugin object derives from this; the kind interfaces live in task.hpp,
// model.hpp, attention.hpp, optimizer.hpp, ddp.hpp and profiler.hpp.
class PluginBase {
 public:
  virtual ~PluginBase();
};

struct PluginManifest {
  int api_version = kPluginApiVersion;
  PluginKind kind = PluginKind::Task;
  std::string name;
  std::string version;
  std::string description;  // one line
  std::vector<OptionSpec> options;
  std::function<std::unique_ptr<PluginBase>(const Params&, Context&)> create;
  // Optional: numbers that follow from the options alone, without building the
  // plugin (a model's d_model, context_length, parameters), for analytic tasks
  // that must not allocate. Reached through Context::facts.
  std::function<std::map<std::string, double>(const Params&)> facts;
};

}  // namespace runner

#define RUNNER_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

// Defines the two symbols the host looks up. `make_manifest` returns a PluginManifest.
#define RUNNER_PLUGIN(make_manifest)                                              \
  RUNNER_PLUGIN_EXPORT int runner_plugin_api_version() {                          \
    return ::runner::kPluginApiVersion;                                           \
  }                                                                               \
  RUNNER_PLUGIN_EXPORT const ::runner::PluginManifest* runner_plugin_manifest() { \
    static const ::runner::PluginManifest manifest = make_manifest();             \
    return &manifest;                                                             \
  }
