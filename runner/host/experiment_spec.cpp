// The experiment as it runs: the loaded document with --smoke and --set applied, its
// name and question checked, and its parts with the top-level defaults merged in.
#include "experiment_spec.hpp"

#include <algorithm>
#include <set>

#include "config_overrides.hpp"

namespace runner {
namespace {

const std::vector<std::string> kPartKeys = {"name",    "task",      "params",   "sweep",
                                            "measure", "precision", "seed",     "profilers",
                                            "description", "enabled"};

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

}  // namespace

Experiment load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                           bool smoke) {
  return resolve_experiment(load_document(file), overrides, smoke);
}

Experiment load_experiment_text(const std::string& text, const std::filesystem::path& file,
                                const std::vector<std::string>& overrides, bool smoke) {
  return resolve_experiment(load_document_text(text, file), overrides, smoke);
}

Experiment resolve_experiment(ExperimentDocument loaded, const std::vector<std::string>& overrides, bool smoke) {
  ExperimentDocument& doc = loaded;
  const std::filesystem::path& file = loaded.file;
  if (smoke) apply_smoke(doc);
  for (const std::string& o : overrides) apply_override(doc, o);
  // --set values are documents of their own: check the whole again.
  if (!overrides.empty()) {
    size_t visited = 0;
    reject_duplicate_keys(doc.document, doc.source, "", visited);
  }
  check_top_level_keys(doc);
  drop_disabled_reports(doc.document, doc.source);
  Experiment exp;
  exp.file = file;
  exp.document = doc.document;
  exp.source = doc.source;
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

