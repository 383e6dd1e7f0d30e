// The experiment parsed once: the loaded document with --smoke and --set applied, its
// name and question checked, its parts with the top-level defaults merged in and their
// sweeps as factors, its report specs parsed, and the rest of its keys typed.
#include "config/experiment.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include "config/config_overrides.hpp"

namespace runner {
namespace {

const std::vector<std::string> kPartKeys = {"name",    "task",      "params",   "sweep",
                                            "measure", "precision", "seed",     "profilers",
                                            "description", "enabled", "processes"};

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

// ---- parts ------------------------------------------------------------------------

struct PartNode {
  std::string name;
  bool enabled = true;
  YAML::Node node;  // has task, params, sweep, measure, precision, seed, profilers
};

std::vector<PartNode> part_nodes(const YAML::Node& doc, const SourceMap& source) {
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
      for (const auto& [path, set] : source.overridden)
        if (path == "parts" || path.rfind("parts.", 0) == 0)
          throw ConfigError(set + ": parts: expected a non-empty list of parts, and this makes it a map; an "
                                  "override addresses a part the file has (parts.<name>.<key>)");
      throw ConfigError(source.where(list, "parts") + ": parts: expected a non-empty list");
    }
    if (doc["task"] || doc["params"] || doc["sweep"]) {
      // `runner quickstart params.batch_size=8`: the override made the top-level key,
      // so the override is what is wrong, not the file.
      for (const char* key : {"task", "params", "sweep"})
        for (const auto& [path, set] : source.overridden)
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
      throw ConfigError(source.where(list, "parts") +
                        ": parts: use either top-level task/params/sweep or parts, not both");
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = "parts." + std::to_string(i);
      check_keys(list[i], kPartKeys, source, where);
      if (!list[i]["name"]) throw ConfigError(source.where(list[i], where) + ": " + where + ": needs a name");
      if (!list[i]["name"].IsScalar())
        throw ConfigError(source.where(list[i]["name"], where + ".name") + ": " + where + ".name: expected a name");
      const std::string pname = list[i]["name"].Scalar();
      // Part names become artifact directories (artifacts/<part>-<index>/).
      check_path_component(pname, source.where(list[i]["name"], where + ".name") + ": " + where + ".name");
      if (!seen.insert(pname).second)
        throw ConfigError(source.where(list[i]["name"], where) + ": part name '" + pname + "' repeats");
      bool on = true;
      if (const YAML::Node enabled = list[i]["enabled"]) {
        if (!enabled.IsScalar() || !YAML::convert<bool>::decode(enabled, on))
          throw ConfigError(source.where(enabled, where + ".enabled") + ": parts." + pname +
                            ".enabled: expected true or false");
      }
      parts.push_back({pname, on, with_defaults(list[i])});
    }
    if (std::none_of(parts.begin(), parts.end(), [](const PartNode& p) { return p.enabled; }))
      throw ConfigError(source.where(list, "parts") +
                        ": parts: every part has enabled: false, so nothing would run; enable one");
  } else {
    YAML::Node part(YAML::NodeType::Map);
    for (const char* key : {"task", "params", "sweep"})
      if (doc[key]) part[key] = doc[key];
    parts.push_back({"main", true, with_defaults(part)});
  }
  for (const auto& p : parts) {
    if (!p.node["task"] || !p.node["task"].IsScalar())
      throw ConfigError(source.file + ": part '" + p.name + "': task: missing; name a task plugin (see `runner plugins`)");
  }
  return parts;
}

// ---- sweeps -----------------------------------------------------------------------

SweepFactor axis_factor(const std::string& path, const YAML::Node& values, const SourceMap& src) {
  if (!values.IsSequence() || values.size() == 0)
    throw ConfigError(src.where(values, "sweep." + path) + ": sweep." + path +
                      ": an axis needs a non-empty list of values, e.g. [a, b]");
  SweepFactor f;
  for (const auto& v : values) f.push_back({{path, v}});
  return f;
}

SweepFactor zip_factor(const YAML::Node& group, const SourceMap& src) {
  if (!group.IsMap()) throw ConfigError(src.where(group, "sweep.zip") + ": sweep.zip: expected a map of axis: [values]");
  SweepFactor f;
  size_t length = 0;
  bool first = true;
  for (const auto& kv : group) {
    const std::string path = kv.first.as<std::string>();
    if (!kv.second.IsSequence())
      throw ConfigError(src.where(kv.second, "sweep.zip." + path) + ": sweep.zip." + path + ": expected a list");
    if (first) {
      length = kv.second.size();
      f.resize(length);
      first = false;
    } else if (kv.second.size() != length) {
      throw ConfigError(src.where(kv.second, "sweep.zip." + path) + ": sweep.zip." + path + ": has " +
                        std::to_string(kv.second.size()) + " values but the zip's first axis has " +
                        std::to_string(length) + "; zipped axes pair up and need equal lengths");
    }
    for (size_t i = 0; i < length; ++i) f[i].push_back({path, kv.second[i]});
  }
  return f;
}

std::vector<SweepFactor> factors_of(const YAML::Node& sweep, const SourceMap& src) {
  std::vector<SweepFactor> out;
  if (!sweep || sweep.IsNull()) return out;
  if (!sweep.IsMap()) throw ConfigError(src.where(sweep, "sweep") + ": sweep: expected a map of axis: [values]");
  for (const auto& kv : sweep) {
    const std::string key = kv.first.as<std::string>();
    if (key == "zip") {
      if (kv.second.IsSequence()) {
        for (const auto& g : kv.second) out.push_back(zip_factor(g, src));
      } else {
        out.push_back(zip_factor(kv.second, src));
      }
    } else {
      out.push_back(axis_factor(key, kv.second, src));
    }
  }
  return out;
}

// `key` of `map` as an option tree; an empty one when missing (the invalid node a const
// map returns for a missing key throws when assigned).
OptionTree option_tree(const YAML::Node& map, const char* key) { return map[key] ? map[key] : OptionTree(); }

PartSpec part_spec(const PartNode& part, const SourceMap& src) {
  const YAML::Node& node = part.node;
  PartSpec p;
  p.name = part.name;
  p.enabled = part.enabled;
  p.task = node["task"].Scalar();
  p.task_where = src.where(node["task"], "task");
  p.params = option_tree(node, "params");
  p.measure = option_tree(node, "measure");
  p.profilers = option_tree(node, "profilers");
  p.precision_seed = YAML::Node(YAML::NodeType::Map);
  for (const char* key : {"precision", "seed"})
    if (node[key]) p.precision_seed[key] = node[key];
  p.sweep = factors_of(node["sweep"], src);
  if (const YAML::Node processes = node["processes"]) {
    p.has_processes = true;
    try {
      p.processes = std::max(0, processes.as<int>());
    } catch (const std::exception&) {
    }
    p.processes_where = src.where(processes, "parts." + p.name + ".processes");
  }
  return p;
}

// ---- reports ----------------------------------------------------------------------

// One report spec (`report:` is a map, or a list of them).
report::ReportSpec parse_report(const YAML::Node& node, const SourceMap& source) {
  try {
    return report::parse_report_spec(node, source.file);  // shape, names, stats, formats
  } catch (const report::SpecError& e) {
    // A key that a --set wrote has no line in the file: the message names the --set.
    const std::string text = e.what(), file = source.file + ": ";
    if (text.rfind(file, 0) == 0) {
      const std::string rest = text.substr(file.size());
      const std::string origin = source.where(YAML::Node(), rest.substr(0, rest.find(": ")));
      if (origin != source.file) throw ConfigError(origin + ": " + rest);
    }
    throw;
  }
}

// The names a table or figure looks records up by, with where each is written.
struct NameCollector {
  const SourceMap& src;
  std::vector<RecordName>& out;

  void key(const std::string& name, const YAML::Node& node, const std::string& path) {
    out.push_back({false, name, path, src.where(node, path)});
  }
  // `node` is a scalar or a list of scalars naming keys.
  void keys(const YAML::Node& node, const std::string& path) {
    if (!node) return;
    if (node.IsScalar()) return key(node.Scalar(), node, path);
    for (size_t i = 0; i < node.size(); ++i)
      if (node[i].IsScalar()) key(node[i].Scalar(), node[i], path + "[" + std::to_string(i) + "]");
  }
  void where(const YAML::Node& node, const std::string& path) {
    if (!node || !node.IsMap()) return;
    for (const auto& kv : node) key(kv.first.Scalar(), kv.first, path + "." + kv.first.Scalar());
  }
  void metric(const YAML::Node& node, const std::string& path) {
    if (!node || !node.IsScalar()) return;
    out.push_back({true, node.Scalar(), path, src.where(node, path)});
  }
};

ReportReader reader_of(const YAML::Node& item, const std::string& path, bool figure, const SourceMap& src) {
  ReportReader r;
  r.path = path;
  r.figure = figure;
  if (const YAML::Node part = item["part"]) {
    r.part_where = src.where(part, path + ".part");
    if (part.IsSequence())
      for (const YAML::Node& name : part) r.parts.names.push_back(name.Scalar());
    else
      r.parts.names.push_back(part.Scalar());
  }
  NameCollector names{src, r.names};
  if (figure) {
    names.keys(item["x"], path + ".x");
    names.keys(item["series"], path + ".series");
    names.keys(item["panel"], path + ".panel");
    names.where(item["where"], path + ".where");
    names.metric(item["metric"], path + ".metric");
    return r;
  }
  names.keys(item["rows"], path + ".rows");
  names.keys(item["pivot"], path + ".pivot");
  names.where(item["where"], path + ".where");
  names.metric(item["metric"], path + ".metric");
  const YAML::Node columns = item["columns"];
  for (size_t c = 0; columns && c < columns.size(); ++c) {
    const std::string at = path + ".columns[" + std::to_string(c) + "]";
    names.metric(columns[c]["metric"], at + ".metric");
    names.keys(columns[c]["key"], at + ".key");
    names.where(columns[c]["where"], at + ".where");
  }
  return r;
}

void parse_reports(const YAML::Node& doc, const SourceMap& source, ExperimentSpec& spec) {
  const YAML::Node node = doc["report"];
  spec.has_report = static_cast<bool>(node);
  if (!node) return;
  std::vector<std::pair<YAML::Node, std::string>> entries;
  if (node.IsSequence())
    for (size_t k = 0; k < node.size(); ++k) entries.emplace_back(node[k], "report[" + std::to_string(k) + "]");
  else
    entries.emplace_back(node, "report");
  for (const auto& [entry, where] : entries) {
    try {
      spec.parsed_reports.push_back(parse_report(entry, source));
    } catch (...) {
      spec.report_error = std::current_exception();
      return;
    }
    const YAML::Node tables = entry["tables"];
    for (size_t i = 0; tables && i < tables.size(); ++i)
      spec.report_readers.push_back(
          reader_of(tables[i], where + ".tables[" + std::to_string(i) + "]", false, source));
    const YAML::Node figures = entry["figures"];
    for (size_t i = 0; figures && i < figures.size(); ++i)
      spec.report_readers.push_back(
          reader_of(figures[i], where + ".figures[" + std::to_string(i) + "]", true, source));
  }
}

std::size_t saturating_product(std::size_t a, std::size_t b) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) return std::numeric_limits<std::size_t>::max();
  return a * b;
}

}  // namespace

std::size_t PartSpec::point_count() const {
  std::size_t n = 1;
  for (const SweepFactor& f : sweep) n = saturating_product(n, f.size());
  return n;
}

const std::vector<report::ReportSpec>& ExperimentSpec::reports() const {
  if (report_error) std::rethrow_exception(report_error);
  return parsed_reports;
}

std::vector<const PartSpec*> ExperimentSpec::parts_to_run(bool include_disabled) const {
  std::vector<const PartSpec*> out;
  for (const PartSpec& p : parts)
    if (p.enabled || include_disabled) out.push_back(&p);
  return out;
}

ExperimentSpec load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                               bool smoke) {
  return resolve_experiment(load_document(file), overrides, smoke);
}

ExperimentSpec load_experiment_text(const std::string& text, const std::filesystem::path& file,
                                    const std::vector<std::string>& overrides, bool smoke) {
  return resolve_experiment(load_document_text(text, file), overrides, smoke);
}

ExperimentSpec resolve_experiment(ExperimentDocument loaded, const std::vector<std::string>& overrides, bool smoke) {
  return parse_experiment(resolve_document(loaded, overrides, smoke));
}

ExperimentDocument& resolve_document(ExperimentDocument& doc, const std::vector<std::string>& overrides, bool smoke) {
  if (smoke) apply_smoke(doc);
  for (const std::string& o : overrides) apply_override(doc, o);
  // --set values are documents of their own: check the whole again.
  if (!overrides.empty()) {
    size_t visited = 0;
    reject_duplicate_keys(doc.document, doc.source, "", visited);
  }
  check_top_level_keys(doc);
  drop_disabled_reports(doc.document, doc.source);
  return doc;
}

ExperimentSpec parse_experiment(const ExperimentDocument& doc) {
  const std::filesystem::path& file = doc.file;
  const YAML::Node& d = doc.document;
  ExperimentSpec exp;
  exp.file = file;
  exp.source = doc.source;
  const YAML::Node name = d["experiment"];
  if (!name || !name.IsScalar())
    throw ConfigError(file.string() + ": experiment: missing; add 'experiment: <name>' at the top");
  exp.name = name.Scalar();
  // The name becomes runs/<name>/: it must stay one directory inside runs/.
  check_path_component(exp.name, exp.source.where(name, "experiment") + ": experiment");
  // question: the id of the course question the experiment answers (`runner list` groups by it).
  if (const YAML::Node question = d["question"]) {
    if (!question.IsScalar() || question.Scalar().empty())
      throw ConfigError(exp.source.where(question, "question") +
                        ": question: expected the id of the question this experiment answers, e.g. "
                        "'question: benchmarking_script' (or no question: key)");
    exp.question = question.Scalar();
  }
  if (const YAML::Node description = d["description"]; description && description.IsScalar())
    exp.description = description.Scalar();
  exp.has_smoke = static_cast<bool>(d["smoke"]);
  for (const PartNode& part : part_nodes(d, exp.source)) exp.parts.push_back(part_spec(part, exp.source));
  if (!d["parts"])
    for (PartSpec& part : exp.parts) part.has_processes = false;  // the top-level processes: is the experiment's
  if (const YAML::Node device = d["device"]) {
    exp.device_where = exp.source.where(device, "device");
    if (!device.IsScalar()) throw ConfigError(exp.device_where + ": device: expected one of cpu, cuda, auto");
    exp.device = device.Scalar();
  }
  if (const YAML::Node processes = d["processes"]) {
    exp.has_processes = true;
    exp.processes = 0;
    try {
      exp.processes = std::max(0, processes.as<int>());
    } catch (const std::exception&) {
    }
    exp.processes_where = exp.source.where(processes, "processes");
  }
  if (const YAML::Node history = d["history"]) {
    if (!history.IsScalar())
      throw ConfigError(exp.source.where(history, "history") +
                        ": history: expected the name the run history files this experiment under");
    exp.history = history.Scalar();
  }
  parse_reports(d, exp.source, exp);
  exp.resolved = resolved_text(d);
  return exp;
}

StoredRunConfig::StoredRunConfig(const std::filesystem::path& config) : file_(config.string()) {
  const YAML::Node doc = load_yaml_file(config);
  if (const YAML::Node name = doc["experiment"]) {
    experiment_name = name.IsScalar() ? name.Scalar() : "";
    experiment_text = YAML::Dump(name);
  }
  has_report = static_cast<bool>(doc["report"]);
  if (has_report) {
    report_ = doc["report"];
    report_text = YAML::Dump(report_);
  }
}

std::vector<report::ReportSpec> StoredRunConfig::report_specs() const {
  std::vector<report::ReportSpec> specs;
  if (report_.IsSequence()) {
    for (const auto& item : report_) specs.push_back(report::parse_report_spec(item, file_));
  } else {
    specs.push_back(report::parse_report_spec(report_, file_));
  }
  return specs;
}

}  // namespace runner
