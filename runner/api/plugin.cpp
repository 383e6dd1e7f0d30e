#include "runner/plugin.hpp"

#include <array>
#include <utility>

namespace runner {
namespace {
constexpr std::array<std::pair<PluginKind, const char*>, 6> kKindNames{{
    {PluginKind::Task, "task"},
    {PluginKind::Model, "model"},
    {PluginKind::Attention, "attention"},
    {PluginKind::Optimizer, "optimizer"},
    {PluginKind::Ddp, "ddp"},
    {PluginKind::Profiler, "profiler"},
}};

OptionSpec make(std::string name, OptionType type, Value def, std::string help) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.default_value = std::move(def);
  spec.help = std::move(help);
  return spec;
}
}  // namespace

const char* to_string(PluginKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  return "?";
}

bool parse_plugin_kind(const std::string& text, PluginKind& out) {
  for (const auto& [k, name] : kKindNames) {
    if (text == name) {
      out = k;
      return true;
    }
  }
  return false;
}

const char* to_string(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "bool";
    case OptionType::Int: return "int";
    case OptionType::Float: return "float";
    case OptionType::String: return "string";
    case OptionType::Enum: return "enum";
    case OptionType::IntList: return "list<int>";
    case OptionType::FloatList: return "list<float>";
    case OptionType::StringList: return "list<string>";
    case OptionType::Plugin: return "plugin";
  }
  return "?";
}

OptionSpec OptionSpec::at_least(double lo) const {
  OptionSpec spec = *this;
  spec.min_value = lo;
  return spec;
}

OptionSpec OptionSpec::in_range(double lo, double hi) const {
  OptionSpec spec = *this;
  spec.min_value = lo;
  spec.max_value = hi;
  return spec;
}

OptionSpec opt_bool(std::string name, bool def, std::string help) {
  return make(std::move(name), OptionType::Bool, Value(def), std::move(help));
}
OptionSpec opt_int(std::string name, Value def, std::string help) {
  return make(std::move(name), OptionType::Int, std::move(def), std::move(help));
}
OptionSpec opt_float(std::string name, Value def, std::string help) {
  return make(std::move(name), OptionType::Float, std::move(def), std::move(help));
}
OptionSpec opt_string(std::string name, Value def, std::string help) {
  return make(std::move(name), OptionType::String, std::move(def), std::move(help));
}
OptionSpec opt_enum(std::string name, std::vector<std::string> choices, Value def, std::string help) {
  OptionSpec spec = make(std::move(name), OptionType::Enum, std::move(def), std::move(help));
  spec.choices = std::move(choices);
  return spec;
}
OptionSpec opt_list(std::string name, OptionType list_type, Value def, std::string help) {
  return make(std::move(name), list_type, std::move(def), std::move(help));
}
OptionSpec opt_plugin(std::string name, PluginKind kind, Value def, std::string help) {
  OptionSpec spec = make(std::move(name), OptionType::Plugin, std::move(def), std::move(help));
  spec.plugin_kind = kind;
  return spec;
}

}  // namespace runner
