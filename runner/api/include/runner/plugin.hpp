// What a plugin shared library exports, and what the host needs to know about it.
//
// A plugin .so defines one manifest with RUNNER_PLUGIN(make_manifest). The host
// reads runner_plugin_api_version() first and only touches the manifest when the
// version matches, so a plugin built against another API is skipped, not crashed on.
// It then compares runner_plugin_build_info() (LibTorch version and C++ ABI, plain C
// text) with its own, so a plugin built against another LibTorch is skipped too.
#pragma once
#include <functional>
#include <map>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/version.h>

#include "runner/params.hpp"

namespace runner {

// Bump when any public header changes layout or virtual interface.
inline constexpr int kPluginApiVersion = 5;

enum class PluginKind { Task, Model, Attention, Optimizer, Ddp, Profiler };
const char* to_string(PluginKind kind);
bool parse_plugin_kind(const std::string& text, PluginKind& out);

enum class OptionType {
  Bool, Int, Float, String, Enum,     // scalars; Enum is a String from `choices`
  IntList, FloatList, StringList,     // YAML sequences of scalars
  Plugin,                             // a nested plugin of `plugin_kind`: a name or {name: ..., options...};
                                      // optional when its default is "none" (Params::plugin(key).plugin_name() == "none")
};
const char* to_string(OptionType type);

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::String;
  Value default_value;  // empty: the option is required
  std::string help;
  std::vector<std::string> choices;  // Enum only
  PluginKind plugin_kind = PluginKind::Model;  // Plugin only
  // Allowed range of Int/Float values and of every element of Int/Float lists.
  double min_value = -std::numeric_limits<double>::infinity();
  double max_value = std::numeric_limits<double>::infinity();

  // opt_int("size", 1024, "...").at_least(1)
  OptionSpec at_least(double lo) const;
  OptionSpec in_range(double lo, double hi) const;
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
  // What the records carry (tasks: metrics and labels; profilers: the metrics they
  // add). Report specs are checked against them; unset means "not declared" (names
  // made at run time), and then nothing is checked.
  std::optional<std::vector<std::string>> metrics;
  std::optional<std::vector<std::string>> labels;
  std::function<std::unique_ptr<PluginBase>(const Params&, Context&)> create;
  // Optional: numbers that follow from the options alone, without building the
  // plugin (a model's d_model, context_length, parameters), for analytic tasks
  // that must not allocate. Reached through Context::facts.
  std::function<std::map<std::string, double>(const Params&)> facts;
  // Optional: called once per point before the sweep starts (not on --dry-run); throws
  // std::exception with a one-line reason when the point cannot run here at all
  // (a missing interpreter, a device the plugin needs).
  std::function<void(const Params&)> preflight;
};

}  // namespace runner

#define RUNNER_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

#define RUNNER_PLUGIN_STRINGIFY2(x) #x
#define RUNNER_PLUGIN_STRINGIFY(x) RUNNER_PLUGIN_STRINGIFY2(x)
// What a plugin must share with the host beyond the API version: the LibTorch it was
// compiled against and libstdc++'s string ABI. Expanded where RUNNER_PLUGIN is used.
#define RUNNER_PLUGIN_BUILD_INFO \
  "libtorch=" TORCH_VERSION " cxx11_abi=" RUNNER_PLUGIN_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)

// Defines the symbols the host looks up. `make_manifest` returns a PluginManifest.
#define RUNNER_PLUGIN(make_manifest)                                              \
  RUNNER_PLUGIN_EXPORT int runner_plugin_api_version() {                          \
    return ::runner::kPluginApiVersion;                                           \
  }                                                                               \
  RUNNER_PLUGIN_EXPORT const char* runner_plugin_build_info() {                   \
    return RUNNER_PLUGIN_BUILD_INFO;                                              \
  }                                                                               \
  RUNNER_PLUGIN_EXPORT const ::runner::PluginManifest* runner_plugin_manifest() { \
    static const ::runner::PluginManifest manifest = make_manifest();             \
    return &manifest;                                                             \
  }
