// The `--set key.path=value` grammar and the document's `smoke:` overrides: dotted
// paths into the experiment document, list entries by index or `name`, sweep axes as
// flat dotted keys, and a value set over a swept axis replacing the axis.
#include "config/config_overrides.hpp"

#include <algorithm>
#include <iostream>
#include <set>

namespace runner {
namespace {

// Keys whose children are dotted paths themselves, so new entries stay flat.
const std::set<std::string> kFlatMaps = {"sweep", "smoke"};

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (i > from ? "." : "") + parts[i];
  return out;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}


// `--set params.batch_size=16` on an experiment that sweeps batch_size: the sweep
// would overwrite the value at every point, so the value replaces the axis (a note
// says so). An axis zipped with others cannot go alone: refused.
void replace_swept_axis(YAML::Node doc, const std::string& path, const std::string& set_text) {
  std::string rest = path;
  YAML::Node owner = doc;
  if (rest.rfind("parts.", 0) == 0) {
    const size_t dot = rest.find('.', 6);
    if (dot == std::string::npos || !doc["parts"] || !doc["parts"].IsSequence()) return;
    const std::string part = rest.substr(6, dot - 6);
    rest = rest.substr(dot + 1);
    bool found = false;
    for (size_t k = 0; k < doc["parts"].size() && !found; ++k) {
      const YAML::Node entry = doc["parts"][k];
      if ((is_index(part) && part.size() < 10 && std::stoul(part) == k) ||
          (entry.IsMap() && entry["name"] && entry["name"].IsScalar() && entry["name"].Scalar() == part)) {
        owner.reset(entry);
        found = true;
      }
    }
    if (!found) return;
  }
  std::string axis;
  if (rest.rfind("params.", 0) == 0) axis = rest.substr(7);
  else if (rest.rfind("measure.", 0) == 0 || rest == "precision" || rest == "seed") axis = rest;
  if (axis.empty() || !owner.IsMap()) return;
  YAML::Node sweep = owner["sweep"];
  if (!sweep || !sweep.IsMap()) return;
  if (sweep[axis]) {
    YAML::Emitter values;
    values << YAML::Flow << sweep[axis];
    std::cerr << "note: " << set_text << " replaces the sweep axis " << axis << ": " << values.c_str()
              << " (to sweep other values: --set " << path.substr(0, path.size() - rest.size()) << "sweep." << axis
              << "=[...])\n";
    sweep.remove(axis);
    return;
  }
  if (const YAML::Node zip = sweep["zip"]) {
    const auto check = [&](const YAML::Node& group) {
      if (group.IsMap() && group[axis])
        throw ConfigError(set_text + ": " + axis + " is swept together with other axes (sweep.zip); set the whole "
                          "group, e.g. --set sweep.zip." + axis + "=[...] with its partners, or remove the zip");
    };
    if (zip.IsSequence())
      for (const auto& g : zip) check(g);
    else
      check(zip);
  }
}


}  // namespace

void set_path(YAML::Node root, const std::string& path, const YAML::Node& value) {
  const auto parts = split(path);
  // Finding the longest existing dotted key costs parts^2 joins per level: a
  // path deeper than any document may be is refused before that.
  if (parts.size() > kMaxDocumentDepth)
    throw ConfigError("--set " + path.substr(0, 80) + (path.size() > 80 ? "..." : "") + ": " +
                      std::to_string(parts.size()) + " dotted parts; a key path has at most " +
                      std::to_string(kMaxDocumentDepth));
  YAML::Node node;
  node.reset(root);
  std::string parent_key;
  size_t i = 0;
  while (i < parts.size()) {
    if (node.IsSequence()) {
      bool found = false;
      for (size_t k = 0; k < node.size() && !found; ++k) {
        // A `name` that is not a scalar (`{name: {x: 1}}`) names nothing here; validation
        // reports it with its line.
        const bool match = is_index(parts[i]) ? parts[i].size() < 10 && std::stoul(parts[i]) == k
                                              : (node[k].IsMap() && node[k]["name"] && node[k]["name"].IsScalar() &&
                                                 node[k]["name"].Scalar() == parts[i]);
        if (match) {
          if (i + 1 == parts.size()) {
            node[k] = value;
            return;
          }
          YAML::Node next = node[k];
          node.reset(next);
          found = true;
        }
      }
      if (!found) throw ConfigError("--set " + path + ": no list entry '" + parts[i] + "'");
      parent_key = parts[i++];
      continue;
    }
    if (node.IsScalar()) {
      // "attention: naive" gains options: becomes {name: naive, ...}.
      const std::string name = node.Scalar();
      YAML::Node map(YAML::NodeType::Map);
      map["name"] = name;
      node = map;  // assigns through to the parent's entry
    }
    // Longest dotted key that exists at this level wins ("sweep" has "model.size").
    size_t matched = 0;
    if (node.IsMap()) {
      for (size_t j = parts.size(); j > i; --j) {
        if (node[join(parts, i, j)]) {
          matched = j;
          break;
        }
      }
    }
    if (matched == 0) matched = kFlatMaps.count(parent_key) ? parts.size() : i + 1;
    const std::string key = join(parts, i, matched);
    if (matched == parts.size()) {
      node[key] = value;
      return;
    }
    if (!node[key] || node[key].IsNull()) node[key] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = node[key];
    node.reset(next);
    parent_key = key;
    i = matched;
  }
}


void apply_smoke(ExperimentDocument& exp) {
  const std::filesystem::path& file = exp.file;
  const YAML::Node s = exp.document["smoke"];
  if (!s) throw ConfigError(file.string() + ": --smoke given but the experiment has no 'smoke:' overrides");
  if (!s.IsMap()) throw ConfigError(exp.source.where(s, "smoke") + ": smoke: expected a map of path: value");
  // The entries first: a smoke key may name `smoke` itself, and setting it while walking
  // the map would free the map under the iterator.
  std::vector<std::pair<YAML::Node, YAML::Node>> entries;
  for (const auto& kv : s) entries.emplace_back(kv.first, kv.second);
  for (const auto& kv : entries) {
    const std::string key = kv.first.as<std::string>();
    if (static_cast<size_t>(std::count(key.begin(), key.end(), '.')) >= kMaxDocumentDepth)
      throw ConfigError(exp.source.where(kv.first, "smoke") + ": smoke: a key of " +
                        std::to_string(std::count(key.begin(), key.end(), '.') + 1) +
                        " dotted parts; a key path has at most " + std::to_string(kMaxDocumentDepth));
    set_path(exp.document, key, kv.second);
  }
}

void apply_override(ExperimentDocument& exp, const std::string& o) {
  const size_t eq = o.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + o + ": expected key.path=value");
  if (first_invalid_utf8(o) != std::string::npos) throw ConfigError("--set: a value that is not valid UTF-8");
  const std::string path = o.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(o.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + o + ": value is not valid YAML: " + e.msg);
  }
  // Bounded first (an alias inside its own anchor is a cycle plain_copy would
  // follow forever), then without marks: a --set value's line 1, column 1 is
  // not a place in the file.
  size_t value_nodes = 0;
  reject_duplicate_keys(value, SourceMap{"--set " + o, {}}, path, value_nodes);
  value = plain_copy(value);
  set_path(exp.document, path, value);
  replace_swept_axis(exp.document, path, "--set " + o);
  // Errors are reported with the paths validation uses: part-relative, and a
  // sweep axis as the option it sets.
  std::string relative = path;
  if (relative.rfind("parts.", 0) == 0) {
    const size_t dot = relative.find('.', 6);
    relative = dot == std::string::npos ? relative : relative.substr(dot + 1);
  }
  for (const std::string& p : {path, relative}) {
    exp.source.overridden[p] = "--set " + o;
    if (p.rfind("sweep.", 0) == 0) exp.source.overridden["params." + p.substr(6)] = "--set " + o;
  }
}

}  // namespace runner
