#include "config/validate.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/text_distance.hpp"
#include "config/registry.hpp"

namespace runner {
namespace {

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

std::vector<std::string> option_names(const std::vector<OptionSpec>& options) {
  std::vector<std::string> names;
  for (const auto& o : options) names.push_back(o.name);
  return names;
}

const OptionSpec* find_option(const std::vector<OptionSpec>& options, const std::string& name) {
  for (const auto& o : options)
    if (o.name == name) return &o;
  return nullptr;
}

[[noreturn]] void fail(const SourceMap& src, const YAML::Node& node, const std::string& path,
                       const std::string& what) {
  throw ConfigError(src.where(node, path) + ": " + path + ": " + what);
}

std::string a_type(OptionType type) {
  const std::string name = to_string(type);
  return (name[0] == 'i' || name[0] == 'e' ? "an " : "a ") + name;
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
}

Value scalar_value(const YAML::Node& node, OptionType type, const SourceMap& src,
                   const std::string& path) {
  if (!node.IsScalar())
    fail(src, node, path, "expected " + a_type(type) + ", got " + scalar_text(node) +
                              (node.IsSequence() ? " (a list of values is a sweep: put it under sweep:, or "
                                                   "--set sweep.<axis>=[...])"
                                                 : ""));
  const std::string& text = node.Scalar();
  try {
    switch (type) {
      case OptionType::Bool: return Value(node.as<bool>());
      case OptionType::Int: {
        size_t used = 0;
        const long long v = std::stoll(text, &used, 0);
        if (used != text.size()) break;
        return Value(static_cast<std::int64_t>(v));
      }
      case OptionType::Float: {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used != text.size()) break;
        return Value(v);
      }
      default: return Value(text);
    }
  } catch (const std::exception&) {
  }
  fail(src, node, path, "expected " + a_type(type) + ", got '" + text + "'");
}

OptionType element_type(OptionType list_type) {
  switch (list_type) {
    case OptionType::IntList: return OptionType::Int;
    case OptionType::FloatList: return OptionType::Float;
    default: return OptionType::String;
  }
}

std::string bound_text(double bound) {
  std::ostringstream out;
  out << bound;
  return out.str();
}

// Int/Float values (and list elements) must lie in the option's declared range.
Value in_range(Value v, const OptionSpec& spec, const YAML::Node& node, const SourceMap& src,
               const std::string& path) {
  double x = 0;
  if (const auto* i = std::get_if<std::int64_t>(&v.data)) x = static_cast<double>(*i);
  else if (const auto* d = std::get_if<double>(&v.data)) x = *d;
  else return v;
  const bool bounded_below = std::isfinite(spec.min_value), bounded_above = std::isfinite(spec.max_value);
  if (!std::isnan(x) && x >= spec.min_value && x <= spec.max_value) return v;
  std::string allowed = bounded_below && bounded_above ? "between " + bound_text(spec.min_value) + " and " + bound_text(spec.max_value)
                        : bounded_below                ? "at least " + bound_text(spec.min_value)
                        : bounded_above                ? "at most " + bound_text(spec.max_value)
                                                       : "a finite number";
  fail(src, node, path, node.Scalar() + " is out of range; must be " + allowed);
}

Value convert(const YAML::Node& node, const OptionSpec& spec, const SourceMap& src,
              const std::string& path) {
  switch (spec.type) {
    case OptionType::IntList:
    case OptionType::FloatList:
    case OptionType::StringList: {
      if (!node.IsSequence()) fail(src, node, path, "expected " + a_type(spec.type) + " like [a, b], got " + scalar_text(node));
      Value::List items;
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string at = path + "[" + std::to_string(i) + "]";
        items.push_back(in_range(scalar_value(node[i], element_type(spec.type), src, at), spec, node[i], src, at));
      }
      return Value(std::move(items));
    }
    case OptionType::Enum: {
      Value v = scalar_value(node, OptionType::String, src, path);
      const std::string& s = std::get<std::string>(v.data);
      if (std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end())
        fail(src, node, path, "'" + s + "' is not one of the choices" + suggestion(s, spec.choices));
      return v;
    }
    default: return in_range(scalar_value(node, spec.type, src, path), spec, node, src, path);
  }
}

// Entries of `point` below `name.`, re-rooted.
PathValues sub_point(const PathValues& point, const std::string& name) {
  PathValues out;
  const std::string prefix = name + ".";
  for (const auto& [p, v] : point)
    if (p.rfind(prefix, 0) == 0) out[p.substr(prefix.size())] = v;
  return out;
}

Params resolve_impl(const YAML::Node& node, const std::vector<OptionSpec>& options,
                    const PluginRegistry& registry, const std::string& path,
                    const SourceMap& src, const PathValues& point, bool plugin_map);

Value resolve_plugin(const YAML::Node& given, const OptionSpec& spec, const PluginRegistry& registry,
                     const std::string& path, const SourceMap& src, const PathValues& point) {
  std::string name;
  YAML::Node options_node;
  if (!given.IsDefined() || given.IsNull()) {
    name = spec.default_value.to_string();
  } else if (given.IsScalar()) {
    name = given.Scalar();
  } else if (given.IsMap()) {
    if (!given["name"]) fail(src, given, path, "a plugin given as a map needs 'name: <plugin>'");
    name = given["name"].as<std::string>();
    options_node = given;
  } else {
    fail(src, given, path, "expected a plugin name or {name: ..., options}");
  }
  PathValues nested_point = sub_point(point, spec.name);
  if (auto it = nested_point.find("name"); it != nested_point.end()) {
    name = it->second.as<std::string>();
    nested_point.erase(it);
  }
  const char* kind = to_string(spec.plugin_kind);
  // `none` switches an optional plugin off; only options that default to none allow it.
  if (name == "none") {
    if (spec.default_value.to_string() != "none")
      fail(src, given, path, std::string("this ") + kind + " plugin is required; 'none' is not allowed here");
    if (!nested_point.empty() || options_node.IsMap())
      fail(src, given, path, std::string("'none' takes no options"));
    return Value(std::make_shared<Params>("none"));
  }
  if (name.empty()) fail(src, given, path, std::string("required ") + kind + " plugin is missing");
  const PluginManifest* m = registry.find(spec.plugin_kind, name);
  if (m == nullptr) {
    fail(src, given.IsMap() ? given["name"] : given, path,
         std::string("no ") + kind + " plugin named '" + name + "'" +
             suggestion(name, registry.names(spec.plugin_kind)) + " (see `runner plugins`)");
  }
  auto nested = std::make_shared<Params>(resolve_impl(options_node, m->options, registry, path, src,
                                                      nested_point, /*plugin_map=*/true));
  nested->set_plugin_name(name);
  return Value(nested);
}

Params resolve_impl(const YAML::Node& maybe_node, const std::vector<OptionSpec>& options,
                    const PluginRegistry& registry, const std::string& path,
                    const SourceMap& src, const PathValues& point, bool plugin_map) {
  // A missing key of a const map is an invalid node that throws on inspection.
  const YAML::Node node = maybe_node.IsDefined() ? maybe_node : YAML::Node();
  if (node.IsDefined() && !node.IsNull() && !node.IsMap())
    fail(src, node, path, "expected a map of options, got " + scalar_text(node));
  const auto names = option_names(options);
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      if (plugin_map && key == "name") continue;
      if (!find_option(options, key))
        fail(src, kv.first, join(path, key), "unknown option" + suggestion(key, names));
    }
  }
  for (const auto& [p, v] : point) {
    const std::string head = p.substr(0, p.find('.'));
    if (!find_option(options, head)) fail(src, v, join(path, p), "unknown option" + suggestion(head, names));
  }
  Params out;
  for (const OptionSpec& spec : options) {
    const std::string key_path = join(path, spec.name);
    YAML::Node given;
    if (auto it = point.find(spec.name); it != point.end()) given = it->second;
    else if (node.IsMap() && node[spec.name]) given = node[spec.name];
    if (spec.type == OptionType::Plugin) {
      out.set(spec.name, resolve_plugin(given, spec, registry, key_path, src, point));
    } else if (given.IsDefined() && !given.IsNull()) {
      out.set(spec.name, convert(given, spec, src, key_path));
    } else if (!spec.default_value.empty()) {
      out.set(spec.name, spec.default_value);
    } else {
      fail(src, node, key_path, "required option is missing (" + spec.help + ")");
    }
  }
  return out;
}

}  // namespace

namespace {
// Whether `node` is `tree` or one of its keys or values (same node, not an equal one).
bool holds_node(const YAML::Node& tree, const YAML::Node& node, size_t depth = 0) {
  if (tree.is(node)) return true;
  if (depth > 64) return false;
  if (tree.IsMap()) {
    for (const auto& kv : tree)
      if (holds_node(kv.first, node, depth + 1) || holds_node(kv.second, node, depth + 1)) return true;
  } else if (tree.IsSequence()) {
    for (const auto& item : tree)
      if (holds_node(item, node, depth + 1)) return true;
  }
  return false;
}
}  // namespace

std::string SourceMap::where(const YAML::Node& node, const std::string& dotted_or_indexed) const {
  // Report checks name list entries as tables[0]; --set paths say tables.0.
  std::string path;
  for (char c : dotted_or_indexed)
    if (c == '[') path += '.';
    else if (c != ']') path += c;
  for (const auto& [p, origin] : overridden)
    if (path == p || path.rfind(p + ".", 0) == 0 || p.rfind(path + ".", 0) == 0) return origin;
  if (node.IsDefined()) {
    const YAML::Mark mark = node.Mark();
    std::string origin = file;
    for (const auto& [tree, included_file] : included)
      if (holds_node(tree, node)) {
        origin = included_file;
        break;
      }
    if (mark.line >= 0) return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }
  return file;
}

Params resolve_options(const YAML::Node& node, const std::vector<OptionSpec>& options,
                       const PluginRegistry& registry, const std::string& path,
                       const SourceMap& source, const PathValues& point) {
  return resolve_impl(node, options, registry, path, source, point, false);
}

Params resolve_plugin_options(const PluginRegistry& registry, PluginKind kind,
                              const std::string& name, const std::string& yaml) {
  const PluginManifest* m = registry.find(kind, name);
  if (m == nullptr) throw ConfigError(std::string("no ") + to_string(kind) + " plugin named '" + name + "'");
  const YAML::Node node = yaml.empty() ? YAML::Node() : YAML::Load(yaml);
  Params p = resolve_options(node, m->options, registry, std::string(to_string(kind)) + "/" + name,
                             SourceMap{"<inline>", {}}, {});
  p.set_plugin_name(name);
  return p;
}

}  // namespace runner
