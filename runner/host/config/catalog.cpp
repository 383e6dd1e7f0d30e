#include "config/catalog.hpp"

#include <algorithm>
#include <iomanip>
#include <cmath>
#include <ostream>
#include <set>
#include <sstream>
#include <vector>

#include "base/text_distance.hpp"
#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "config/report_spec_check.hpp"
#include "config/sweep.hpp"

namespace runner {

void print_columns(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c + 1 < row.size(); ++c) {
      if (width.size() <= c) width.resize(c + 1, 0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c + 1 < row.size()) out << std::left << std::setw(static_cast<int>(width[c] + 2)) << row[c];
      else out << row[c];
    }
    out << "\n";
  }
}

namespace {

// Whole numbers in full (1048576, not 1.04858e+06), others as the stream prints them.
std::string bound_text(double bound) {
  if (std::abs(bound) < 1e15 && bound == std::floor(bound)) return std::to_string(static_cast<long long>(bound));
  std::ostringstream s;
  s << bound;
  return s.str();
}

std::string range_text(const OptionSpec& o) {
  const bool lo = std::isfinite(o.min_value), hi = std::isfinite(o.max_value);
  if (lo && hi) return ", " + bound_text(o.min_value) + ".." + bound_text(o.max_value);
  if (lo) return ", >= " + bound_text(o.min_value);
  if (hi) return ", <= " + bound_text(o.max_value);
  return "";
}

// "int, >= 1", "one of fp32|bf16|fp16", "model plugin".
std::string type_text(const OptionSpec& o, const std::string& choice_separator) {
  std::string type = to_string(o.type);
  if (o.type == OptionType::Enum) {
    type = "one of ";
    for (size_t i = 0; i < o.choices.size(); ++i) type += (i ? choice_separator : "") + o.choices[i];
  } else if (o.type == OptionType::Plugin) {
    type = std::string(to_string(o.plugin_kind)) + " plugin";
  }
  return type + range_text(o);
}

// A Markdown table cell: '|' would end the cell, a line break the row.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string option_table(const PluginManifest& manifest) {
  if (manifest.options.empty()) return "";
  std::string table = "| option | type | default | meaning |\n|---|---|---|---|\n";
  for (const OptionSpec& o : manifest.options)
    table += "| " + cell(o.name) + " | " + cell(type_text(o, ", ")) + " | " +
             cell(o.default_value.empty() ? "(required)" : o.default_value.to_string()) + " | " + cell(o.help) +
             " |\n";
  return table;
}

std::string runner_version() { return RUNNER_VERSION; }

void list_plugins(const PluginRegistry& registry, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {{"kind", "name", "version", "description  [file]"}};
  for (const auto& p : registry.plugins()) {
    const auto* m = p.manifest;
    rows.push_back({to_string(m->kind), m->name, m->version, m->description + "  [" + p.file.string() + "]"});
  }
  print_columns(rows, out);
  for (const auto& e : registry.load_errors()) out << "skipped " << e.file.string() << ": " << e.message << "\n";
}

bool describe_plugin(const PluginRegistry& registry, const std::string& what, std::ostream& out, bool markdown) {
  const auto slash = what.find('/');
  PluginKind kind;
  if (slash == std::string::npos || !parse_plugin_kind(what.substr(0, slash), kind)) return false;
  const PluginManifest* m = registry.find(kind, what.substr(slash + 1));
  if (m == nullptr) return false;
  if (markdown) {
    out << option_table(*m);
    return true;
  }
  out << what << " " << m->version << ": " << m->description << "\n";
  if (m->options.empty()) out << "  (no options)\n";
  for (const OptionSpec& o : m->options) {
    const std::string def = o.default_value.empty() ? "(required)" : "default " + o.default_value.to_string();
    out << "  " << std::left << std::setw(20) << o.name << " " << type_text(o, "|") << ", " << def << "\n      "
        << o.help << "\n";
  }
  auto names = [](const std::vector<std::string>& list) {
    std::string s;
    for (const auto& n : list) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  if (m->metrics) {  // the names; which points record which: the manifest's entries
    std::vector<std::string> metric_names;
    for (const std::string& entry : *m->metrics) metric_names.push_back(declared_metric_name(entry));
    out << "  metrics: " << names(metric_names) << "\n";
  }
  if (m->labels && !m->labels->empty()) out << "  labels: " << names(*m->labels) << "\n";
  return true;
}

std::string plugin_suggestion(const PluginRegistry& registry, const std::string& what) {
  std::vector<std::string> all;
  for (const auto& p : registry.plugins()) all.push_back(std::string(to_string(p.manifest->kind)) + "/" + p.manifest->name);
  const std::string best = closest_name(what, all);
  if (!best.empty()) return "; did you mean '" + best + "'?";
  // A bare name ("train_step") or a wrong kind ("tasks/train_step"): match the name alone.
  const std::string name = what.substr(what.find('/') == std::string::npos ? 0 : what.find('/') + 1);
  for (const auto& p : registry.plugins())
    if (p.manifest->name == name) return std::string("; did you mean '") + to_string(p.manifest->kind) + "/" + name + "'?";
  return "";
}

namespace {

// What an experiment file is, for `runner list`: a question of the course spec (it names
// the question's id in `question:`), a study (a file in a subfolder, e.g. studies/: a
// one-off A/B whose outcome the kernel notes keep), or another experiment (the ceilings,
// the quickstart, the measurements beyond the spec).
struct Listed {
  int group;  // 0 question, 1 other, 2 study
  std::vector<std::string> row;
};

void list_file(const std::filesystem::path& file, const std::string& folder_kind, std::vector<Listed>& out,
               int& broken, std::set<std::string>& questions) {
  try {
    const ExperimentSpec exp = load_experiment(file, {}, false);
    const std::string& question = exp.question;
    std::string kind = folder_kind;
    int group = 2;
    if (folder_kind.empty()) {
      group = !question.empty() ? 0 : 1;
      // The question's id only where it is not the experiment's own name (a second file of one question).
      kind = question.empty() ? "other" : question == exp.name ? "question" : "question " + question;
      if (!question.empty()) questions.insert(question);
    }
    out.push_back({group, {file.string(), exp.name, kind, std::to_string(count_points(exp)), exp.description}});
  } catch (const std::exception& e) {
    ++broken;
    out.push_back({folder_kind.empty() ? 1 : 2,
                   {file.string(), "-", folder_kind.empty() ? "-" : folder_kind, "-",
                    std::string("does not load: ") + e.what()}});
  }
}

std::vector<std::filesystem::path> yaml_files(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml") files.push_back(entry.path());
  if (ec) throw ConfigError(dir.string() + ": cannot list experiments (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int list_experiments(const std::filesystem::path& dir, std::ostream& out) {
  std::vector<Listed> listed;
  std::set<std::string> questions;
  int broken = 0;
  for (const auto& file : yaml_files(dir)) list_file(file, "", listed, broken, questions);
  // One level of subfolders: experiments/studies/*.yaml are studies.
  std::error_code ec;
  std::vector<std::filesystem::path> subdirs;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) subdirs.push_back(entry.path());
  std::sort(subdirs.begin(), subdirs.end());
  for (const auto& sub : subdirs) {
    const std::string name = sub.filename().string();
    const std::string kind = name == "studies" ? "study" : name;
    for (const auto& file : yaml_files(sub)) list_file(file, kind, listed, broken, questions);
  }
  std::stable_sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) { return a.group < b.group; });
  std::vector<std::vector<std::string>> rows = {{"file", "experiment", "kind", "points", "description"}};
  size_t count[3] = {0, 0, 0};
  for (const auto& l : listed) {
    rows.push_back(l.row);
    ++count[l.group];
  }
  print_columns(rows, out);
  out << questions.size() << " question" << (questions.size() == 1 ? "" : "s") << " (" << count[0] << " file"
      << (count[0] == 1 ? "" : "s") << "), " << count[1] << " other experiment" << (count[1] == 1 ? "" : "s") << ", "
      << count[2] << " stud" << (count[2] == 1 ? "y" : "ies") << "\n";
  return broken;
}

}  // namespace runner
