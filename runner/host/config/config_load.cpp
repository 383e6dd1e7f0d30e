// Reading an experiment file into one YAML document: the file checks (size, kind),
// UTF-8, the YAML parse, duplicate keys and size bounds, and `include:`.
#include "config/config_load.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "base/text_distance.hpp"

namespace runner {
namespace {

const std::vector<std::string> kTopLevelKeys = {
    "experiment", "description", "device", "seed", "precision", "measure", "profilers",
    "task",       "params",      "sweep",  "parts", "smoke",    "report", "history", "processes", "include",
    "question"};

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
}

}  // namespace

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


namespace {

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


}  // namespace

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

void reject_duplicate_keys(const YAML::Node& node, const SourceMap& src, const std::string& where,
                           size_t& visited, size_t depth) {
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


namespace {

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


YAML::Node load_yaml_file(const std::filesystem::path& file) {
  return parse_yaml(text_of(file), file.string());
}

void check_top_level_keys(const ExperimentDocument& doc) { check_keys(doc.document, kTopLevelKeys, doc.source, ""); }

ExperimentDocument load_document(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw ConfigError(file.string() + ": no such experiment file");
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError(file.string() + ": is a directory; name an experiment file, e.g. experiments/device_ceilings.yaml");
  check_experiment_file(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string() + ": cannot read the experiment file");
  std::stringstream text;
  text << in.rdbuf();
  return load_document_text(text.str(), file);
}

ExperimentDocument load_document_text(const std::string& text, const std::filesystem::path& file) {
  ExperimentDocument exp;
  exp.file = file;
  exp.source.file = file.string();
  require_utf8(text, file.string());
  exp.document = parse_yaml(text, file.string());
  if (!exp.document.IsDefined() || exp.document.IsNull())
    throw ConfigError(file.string() + ": the file is empty; an experiment needs at least 'experiment: <name>' "
                      "and 'task: <task plugin>' (see experiments/device_ceilings.yaml)");
  size_t visited = 0;
  reject_duplicate_keys(exp.document, exp.source, "", visited);
  check_top_level_keys(exp);
  std::vector<std::filesystem::path> chain = {std::filesystem::weakly_canonical(file)};
  exp.document = resolve_includes(exp.document, file, exp.source, chain);
  if (!exp.source.included.empty()) {
    visited = 0;
    reject_duplicate_keys(exp.document, exp.source, "", visited);
    check_top_level_keys(exp);
  }
  return exp;
}

}  // namespace runner
