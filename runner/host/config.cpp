#include "config.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fstream>
#include <iostream>
#include <sstream>

#include "text_distance.hpp"

namespace runner {
namespace {

const std::vector<std::string> kTopLevelKeys = {
    "experiment", "description", "device", "seed", "precision", "measure", "profilers",
    "task",       "params",      "sweep",  "parts", "smoke",    "report", "history", "processes", "include",
    "question"};
const std::vector<std::string> kPartKeys = {"name",    "task",      "params",   "sweep",
                                            "measure", "precision", "seed",     "profilers",
                                            "description", "enabled", "processes"};
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

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
}

// Offset of the first byte that is not part of well-formed UTF-8, or npos.
// Names and values end up in results.jsonl, which JSON requires to be UTF-8.
size_t first_invalid_utf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || c == 0xC0 || c == 0xC1 || c > 0xF4 || i + len > text.size()) return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    const auto next = static_cast<unsigned char>(text[i + 1 < text.size() ? i + 1 : i]);
    if ((c == 0xE0 && next < 0xA0) || (c == 0xED && next > 0x9F) || (c == 0xF0 && next < 0x90) ||
        (c == 0xF4 && next > 0x8F))
      return i;  // overlong, surrogate or beyond U+10FFFF
    i += len;
  }
  return std::string::npos;
}

void require_utf8(const std::string& text, const std::string& file) {
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string::npos) return;
  const size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
  const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n')) + 1;
  const size_t column = line_start == std::string::npos || bad == 0 ? bad + 1 : bad - line_start;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  throw ConfigError(file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": not valid UTF-8 (byte " +
                    byte + "); save the file as UTF-8");
}

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

void check_keys(const YAML::Node& map, const std::vector<std::string>& valid, const SourceMap& src,
                const std::string& where) {
  if (!map.IsMap()) throw ConfigError(src.where(map, where) + ": " + where + ": expected a map");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      const std::string path = where.empty() ? key : where + "." + key;
      throw ConfigError(src.where(kv.first, path) + ": " + path + ": unknown key" + suggestion(key, valid));
    }
  }
}

// yaml-cpp keeps both entries of a repeated key and lookups see only the first,
// so `params:` written twice would silently drop the second.
// Also bounds the tree: aliases can make a short file expand to billions of nodes.
// And its depth: an alias inside its own anchor (`&a [*a]`) makes a cycle that
// every recursive reader (validation, the emitter) would follow forever.
constexpr size_t kMaxDocumentNodes = 200000;
constexpr size_t kMaxDocumentDepth = 64;

void reject_duplicate_keys(const YAML::Node& node, const SourceMap& src, const std::string& where,
                           size_t& visited, size_t depth = 0) {
  if (++visited > kMaxDocumentNodes)
    throw ConfigError(src.file + ": the document expands to more than " + std::to_string(kMaxDocumentNodes) +
                      " YAML nodes (aliases repeating anchors?); write the experiment out plainly");
  if (depth > kMaxDocumentDepth)
    throw ConfigError(src.where(node, where) + ": " + where + ": nested more than " +
                      std::to_string(kMaxDocumentDepth) + " levels deep (an alias inside its own anchor?)");
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      reject_duplicate_keys(node[i], src, where + (where.empty() ? "" : ".") + std::to_string(i), visited, depth + 1);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const std::string path = where.empty() ? key : where + "." + key;
    if (!kv.first.IsScalar())
      throw ConfigError(src.where(kv.first, where) + ": " + (where.empty() ? "(top level)" : where) +
                        ": keys must be plain names, not lists or maps");
    const auto [it, fresh] = seen.emplace(key, kv.first.Mark());
    if (!fresh)
      throw ConfigError(src.where(kv.first, path) + ": " + path + ": duplicate key (first at line " +
                        std::to_string(it->second.line + 1) + "); merge the two entries");
    reject_duplicate_keys(kv.second, src, path, visited, depth + 1);
  }
}


// ---- include: one experiment file over others ----------------------------------
// `include: base.yaml` (or a list, merged in order, each path relative to the including
// file) puts this document over the included ones: maps merge key by key, lists of maps
// that all carry a `name` (parts) or an `id` (reports) merge entry by entry (new entries
// are appended), any other value replaces the included one.

std::string text_of(const std::filesystem::path& file) {
  check_experiment_file(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string() + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const YAML::Node* find_key(const YAML::Node& map, const std::string& key, YAML::Node& holder) {
  for (const auto& kv : map)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) {
      holder.reset(kv.second);
      return &holder;
    }
  return nullptr;
}

// "name" or "id" when every entry of both lists is a map carrying it, else "".
std::string entry_key(const YAML::Node& a, const YAML::Node& b) {
  for (const char* key : {"name", "id"}) {
    bool all = a.size() + b.size() > 0;
    for (const YAML::Node* list : {&a, &b})
      for (const auto& item : *list) all = all && item.IsMap() && item[key] && item[key].IsScalar();
    if (all) return key;
  }
  return "";
}

YAML::Node merge_over(const YAML::Node& base, const YAML::Node& top) {
  if (base.IsMap() && top.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    YAML::Node holder;
    for (const auto& kv : base) {
      bool overridden = false;
      for (const auto& t : top)
        if (t.first.IsScalar() && kv.first.IsScalar() && t.first.Scalar() == kv.first.Scalar()) {
          out[t.first] = merge_over(kv.second, t.second);
          overridden = true;
          break;
        }
      if (!overridden) out[kv.first] = kv.second;
    }
    for (const auto& t : top)
      if (!t.first.IsScalar() || !find_key(base, t.first.Scalar(), holder)) out[t.first] = t.second;
    return out;
  }
  if (base.IsSequence() && top.IsSequence()) {
    const std::string key = entry_key(base, top);
    if (key.empty()) return top;
    YAML::Node out(YAML::NodeType::Sequence);
    std::vector<bool> used(top.size(), false);
    for (const auto& item : base) {
      YAML::Node merged = item;
      for (size_t i = 0; i < top.size(); ++i)
        if (!used[i] && top[i][key].Scalar() == item[key].Scalar()) {
          merged = merge_over(item, top[i]);
          used[i] = true;
          break;
        }
      out.push_back(merged);
    }
    for (size_t i = 0; i < top.size(); ++i)
      if (!used[i]) out.push_back(top[i]);
    return out;
  }
  return top;
}

std::string chain_text(const std::vector<std::filesystem::path>& chain, const std::filesystem::path& last) {
  std::string out;
  for (const auto& f : chain) out += f.filename().string() + " -> ";
  return out + last.filename().string();
}

// `doc` (read from `file`) with its includes resolved, recursively; `chain` holds the files
// being resolved (a file that includes itself, directly or not, is refused).
YAML::Node resolve_includes(const YAML::Node& doc, const std::filesystem::path& file, SourceMap& source,
                            std::vector<std::filesystem::path>& chain) {
  if (!doc.IsMap()) return doc;
  YAML::Node holder;
  const YAML::Node* include = find_key(doc, "include", holder);
  if (include == nullptr) return doc;
  const SourceMap here{file.string(), {}, {}};
  std::vector<YAML::Node> entries;
  if (include->IsScalar()) {
    entries.push_back(*include);
  } else if (include->IsSequence() && include->size() > 0) {
    for (const auto& e : *include) entries.push_back(e);
  }
  for (const auto& e : entries)
    if (!e.IsScalar() || e.Scalar().empty()) entries.clear();
  if (entries.empty())
    throw ConfigError(here.where(*include, "include") +
                      ": include: expected a file name or a list of them, relative to this file (e.g. "
                      "include: ddp_benchmarking.yaml)");
  YAML::Node merged;
  for (const auto& entry : entries) {
    const std::filesystem::path target =
        std::filesystem::weakly_canonical(file.parent_path() / entry.Scalar());
    std::error_code ec;
    if (!std::filesystem::is_regular_file(target, ec))
      throw ConfigError(here.where(entry, "include") + ": include: no file '" + entry.Scalar() + "' next to " +
                        file.filename().string() + " (" + target.string() + ")");
    if (std::find(chain.begin(), chain.end(), target) != chain.end())
      throw ConfigError(here.where(entry, "include") + ": include: cycle " + chain_text(chain, target) +
                        "; a file cannot include itself, directly or through another");
    const YAML::Node base = parse_yaml(text_of(target), target.string());
    if (!base.IsMap())
      throw ConfigError(target.string() + ": included by " + here.where(entry, "include") +
                        ": expected a map of experiment keys");
    SourceMap base_source{target.string(), {}, {}};
    size_t visited = 0;
    reject_duplicate_keys(base, base_source, "", visited);
    source.included.push_back({base, target.string()});
    chain.push_back(target);
    const YAML::Node resolved = resolve_includes(base, target, source, chain);
    chain.pop_back();
    merged = merged.IsDefined() && !merged.IsNull() ? merge_over(merged, resolved) : resolved;
  }
  YAML::Node own(YAML::NodeType::Map);
  for (const auto& kv : doc)
    if (!(kv.first.IsScalar() && kv.first.Scalar() == "include")) own[kv.first] = kv.second;
  return merge_over(merged, own);
}


// A report entry marked `enabled: false` (a file over a base that writes several reports
// keeps only its own) is left out of the document before anything reads it.
void drop_disabled_reports(YAML::Node& doc, const SourceMap& source) {
  const YAML::Node list = doc["report"];
  if (!list || !list.IsSequence()) return;
  YAML::Node kept(YAML::NodeType::Sequence);
  for (const auto& entry : list) {
    bool on = true;
    if (entry.IsMap() && entry["enabled"]) {
      if (!entry["enabled"].IsScalar() || !YAML::convert<bool>::decode(entry["enabled"], on))
        throw ConfigError(source.where(entry["enabled"], "report.enabled") + ": report.enabled: expected true or false");
      YAML::Node copy(YAML::NodeType::Map);
      for (const auto& kv : entry)
        if (kv.first.Scalar() != "enabled") copy[kv.first] = kv.second;
      if (on) kept.push_back(copy);
      continue;
    }
    kept.push_back(entry);
  }
  if (kept.size() == 0)
    throw ConfigError(source.where(list, "report") + ": report: every entry has enabled: false; enable one or drop report:");
  doc["report"] = kept;
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

YAML::Node plain_copy(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      YAML::Node out(YAML::NodeType::Map);
      for (const auto& kv : node) out[plain_copy(kv.first)] = plain_copy(kv.second);
      if (node.Style() == YAML::EmitterStyle::Flow) out.SetStyle(YAML::EmitterStyle::Flow);
      return out;
    }
    case YAML::NodeType::Sequence: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& item : node) out.push_back(plain_copy(item));
      if (node.Style() == YAML::EmitterStyle::Flow) out.SetStyle(YAML::EmitterStyle::Flow);
      return out;
    }
    case YAML::NodeType::Scalar: return YAML::Node(node.Scalar());
    case YAML::NodeType::Null: return YAML::Node(YAML::NodeType::Null);
    default: return YAML::Node();
  }
}

std::string resolved_text(const YAML::Node& document) {
  YAML::Emitter out;
  out << plain_copy(document);
  return out.c_str();
}

namespace {
constexpr const char* kSmokeMark = " with --smoke";
}  // namespace

std::string config_header(const std::filesystem::path& experiment_file, bool smoke) {
  return "# resolved from " + experiment_file.string() + (smoke ? kSmokeMark : "") + "\n";
}

bool config_header_marks_smoke(const std::string& first_line) {
  const std::string mark = kSmokeMark;
  return first_line.rfind("# resolved from ", 0) == 0 && first_line.size() >= mark.size() &&
         first_line.compare(first_line.size() - mark.size(), std::string::npos, mark) == 0;
}

void check_experiment_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec) return;  // the read that follows says why it cannot open it
  if (!std::filesystem::is_regular_file(status))
    throw ConfigError(file.string() + ": not a regular file (a FIFO, device or socket would hang or never end); "
                      "name an experiment file");
  if (const auto size = std::filesystem::file_size(file, ec); !ec && size > kMaxExperimentFileBytes)
    throw ConfigError(file.string() + ": " + std::to_string(size) + " bytes; an experiment file has at most " +
                      std::to_string(kMaxExperimentFileBytes / (1 << 20)) + " MiB");
}

void check_path_component(const std::string& text, const std::string& what) {
  const bool bad = text.empty() || text == "." || text == ".." || text.find('/') != std::string::npos ||
                   text.find('\\') != std::string::npos || text.find('\0') != std::string::npos ||
                   text.size() > 200 ||
                   std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x20; });
  if (bad)
    throw ConfigError(what + ": '" + text + "' cannot name a directory; use letters, digits, '_', '-' or '.' "
                      "(no '/', '..' or control characters)");
}

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

Experiment load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                           bool smoke) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw ConfigError(file.string() + ": no such experiment file");
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError(file.string() + ": is a directory; name an experiment file, e.g. experiments/device_ceilings.yaml");
  check_experiment_file(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string() + ": cannot read the experiment file");
  std::stringstream text;
  text << in.rdbuf();
  return load_experiment_text(text.str(), file, overrides, smoke);
}

YAML::Node load_yaml_file(const std::filesystem::path& file) {
  return parse_yaml(text_of(file), file.string());
}

Experiment load_experiment_text(const std::string& text, const std::filesystem::path& file,
                                const std::vector<std::string>& overrides, bool smoke) {
  Experiment exp;
  exp.file = file;
  exp.source.file = file.string();
  require_utf8(text, file.string());
  exp.document = parse_yaml(text, file.string());
  if (!exp.document.IsDefined() || exp.document.IsNull())
    throw ConfigError(file.string() + ": the file is empty; an experiment needs at least 'experiment: <name>' "
                      "and 'task: <task plugin>' (see experiments/device_ceilings.yaml)");
  size_t visited = 0;
  reject_duplicate_keys(exp.document, exp.source, "", visited);
  check_keys(exp.document, kTopLevelKeys, exp.source, "");
  std::vector<std::filesystem::path> chain = {std::filesystem::weakly_canonical(file)};
  exp.document = resolve_includes(exp.document, file, exp.source, chain);
  if (!exp.source.included.empty()) {
    visited = 0;
    reject_duplicate_keys(exp.document, exp.source, "", visited);
    check_keys(exp.document, kTopLevelKeys, exp.source, "");
  }
  if (smoke) {
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
  for (const std::string& o : overrides) {
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
  // --set values are documents of their own: check the whole again.
  if (!overrides.empty()) {
    visited = 0;
    reject_duplicate_keys(exp.document, exp.source, "", visited);
  }
  check_keys(exp.document, kTopLevelKeys, exp.source, "");
  drop_disabled_reports(exp.document, exp.source);
  const YAML::Node name = exp.document["experiment"];
  if (!name || !name.IsScalar())
    throw ConfigError(file.string() + ": experiment: missing; add 'experiment: <name>' at the top");
  exp.name = name.Scalar();
  // The name becomes runs/<name>/: it must stay one directory inside runs/.
  check_path_component(exp.name, exp.source.where(name, "experiment") + ": experiment");
  // question: the id of the course question the experiment answers (`runner list` groups by it).
  if (const YAML::Node question = exp.document["question"];
      question && (!question.IsScalar() || question.Scalar().empty()))
    throw ConfigError(exp.source.where(question, "question") +
                      ": question: expected the id of the question this experiment answers, e.g. "
                      "'question: benchmarking_script' (or no question: key)");
  return exp;
}

std::vector<PartNode> experiment_parts(const Experiment& exp, bool include_disabled) {
  const YAML::Node& doc = exp.document;
  const std::vector<std::string> inherited = {"seed", "precision", "measure", "profilers"};
  std::vector<PartNode> parts;
  auto with_defaults = [&](const YAML::Node& part) {
    YAML::Node merged(YAML::NodeType::Map);
    for (const auto& kv : part) merged[kv.first.as<std::string>()] = kv.second;
    for (const auto& key : inherited) {
      if (!doc[key]) continue;
      if (key == "measure" && part["measure"] && part["measure"].IsMap() && doc[key].IsMap()) {
        YAML::Node m(YAML::NodeType::Map);
        for (const auto& kv : doc[key]) m[kv.first.as<std::string>()] = kv.second;
        for (const auto& kv : part["measure"]) m[kv.first.as<std::string>()] = kv.second;
        merged["measure"] = m;
      } else if (!part[key]) {
        merged[key] = doc[key];
      }
    }
    return merged;
  };
  if (const YAML::Node list = doc["parts"]) {
    if (!list.IsSequence() || list.size() == 0) {
      // --set parts.x.y=1 where the file has no parts makes `parts` a map: blame the override.
      for (const auto& [path, set] : exp.source.overridden)
        if (path == "parts" || path.rfind("parts.", 0) == 0)
          throw ConfigError(set + ": parts: expected a non-empty list of parts, and this makes it a map; an "
                                  "override addresses a part the file has (parts.<name>.<key>)");
      throw ConfigError(exp.source.where(list, "parts") + ": parts: expected a non-empty list");
    }
    if (doc["task"] || doc["params"] || doc["sweep"]) {
      // `runner quickstart params.batch_size=8`: the override made the top-level key,
      // so the override is what is wrong, not the file.
      for (const char* key : {"task", "params", "sweep"})
        for (const auto& [path, set] : exp.source.overridden)
          if (doc[key] && (path == key || path.rfind(std::string(key) + ".", 0) == 0)) {
            // `parts` may be a map an override made (--set parts.x.y=1): its entries are
            // key/value pairs, not parts (IsMap() on one throws YAML::InvalidNode).
            std::string names;
            if (list.IsSequence())
              for (const auto& part : list)
                if (part.IsMap() && part["name"] && part["name"].IsScalar())
                  names += (names.empty() ? "" : ", ") + part["name"].Scalar();
            throw ConfigError(set + ": this experiment has parts (" + names + "), so '" + path +
                              "' names no key; address one part, e.g. parts." +
                              (names.empty() ? std::string("<part>") : names.substr(0, names.find(','))) + "." +
                              path);
          }
      throw ConfigError(exp.source.where(list, "parts") +
                        ": parts: use either top-level task/params/sweep or parts, not both");
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = "parts." + std::to_string(i);
      check_keys(list[i], kPartKeys, exp.source, where);
      if (!list[i]["name"]) throw ConfigError(exp.source.where(list[i], where) + ": " + where + ": needs a name");
      if (!list[i]["name"].IsScalar())
        throw ConfigError(exp.source.where(list[i]["name"], where + ".name") + ": " + where + ".name: expected a name");
      const std::string pname = list[i]["name"].Scalar();
      // Part names become artifact directories (artifacts/<part>-<index>/).
      check_path_component(pname, exp.source.where(list[i]["name"], where + ".name") + ": " + where + ".name");
      if (!seen.insert(pname).second)
        throw ConfigError(exp.source.where(list[i]["name"], where) + ": part name '" + pname + "' repeats");
      if (const YAML::Node enabled = list[i]["enabled"]) {
        bool on = true;
        if (!enabled.IsScalar() || !YAML::convert<bool>::decode(enabled, on))
          throw ConfigError(exp.source.where(enabled, where + ".enabled") + ": parts." + pname +
                            ".enabled: expected true or false");
        if (!on && !include_disabled) continue;
      }
      parts.push_back({pname, with_defaults(list[i])});
    }
    if (parts.empty() && !include_disabled)
      throw ConfigError(exp.source.where(list, "parts") +
                        ": parts: every part has enabled: false, so nothing would run; enable one");
  } else {
    YAML::Node part(YAML::NodeType::Map);
    for (const char* key : {"task", "params", "sweep"})
      if (doc[key]) part[key] = doc[key];
    parts.push_back({"main", with_defaults(part)});
  }
  for (const auto& p : parts) {
    if (!p.node["task"] || !p.node["task"].IsScalar())
      throw ConfigError(exp.source.file + ": part '" + p.name + "': task: missing; name a task plugin (see `runner plugins`)");
  }
  return parts;
}

}  // namespace runner
