// Report spec parsing (the `report:` section of an experiment file) and building
// one table from stored records. Rendering lives in render.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "report/report.hpp"

namespace runner::report {
namespace {

using nlohmann::json;

const std::vector<std::string> kReportKeys = {"id", "title", "tables"};
const std::vector<std::string> kTableKeys = {
    "name", "title", "question", "part", "where", "rows", "columns",
    "pivot", "metric", "stat", "format", "show_std", "caption"};
const std::vector<std::string> kColumnKeys = {"id",     "header",   "metric", "stat", "format",
                                              "show_std", "where", "ratio",  "key"};
const std::set<std::string> kStats = {"n", "mean", "std", "median", "min", "max"};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {  // first of equals wins: stable messages
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) best = candidate, best_distance = distance;
  }
  return best;
}

bool is_name(const std::string& text, bool allow_upper_and_dash) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') return true;
    return allow_upper_and_dash && ((c >= 'A' && c <= 'Z') || c == '-');
  });
}

// Knows the file name so every error can point at file:line:col.
struct SpecParser {
  const std::string& file;

  [[noreturn]] void fail(const YAML::Node& at, const std::string& path,
                         const std::string& what) const {
    std::string where = file;
    const YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    if (!mark.is_null())
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    throw std::runtime_error(where + ": " + path + ": " + what);
  }

  void check_keys(const YAML::Node& node, const std::string& path,
                  const std::vector<std::string>& valid) const {
    if (!node.IsDefined() || !node.IsMap()) fail(node, path, "expected a mapping");
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(valid.begin(), valid.end(), key) == valid.end())
        fail(entry.first, path + "." + key,
             "unknown key; did you mean '" + closest(key, valid) + "'?");
    }
  }

  std::string scalar(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) fail(node, path, "expected a single value");
    return node.Scalar();
  }

  std::string optional_scalar(const YAML::Node& parent, const char* key,
                              const std::string& path) const {
    return parent[key] ? scalar(parent[key], path + "." + key) : std::string();
  }

  bool boolean(const YAML::Node& node, const std::string& path) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
      fail(node, path, "expected true or false");
    return value;
  }

  std::vector<std::string> keys(const YAML::Node& node, const std::string& path) const {
    if (node.IsScalar()) return {node.Scalar()};
    if (!node.IsSequence() || node.size() == 0) fail(node, path, "expected a list of keys");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < node.size(); ++i)
      out.push_back(scalar(node[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }

  std::map<std::string, std::string> where(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap()) fail(node, path, "expected a mapping of key: value");
    std::map<std::string, std::string> out;
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      out[key] = scalar(entry.second, path + "." + key);
    }
    return out;
  }

  std::string stat(const YAML::Node& parent, const std::string& path) const {
    const std::string value = optional_scalar(parent, "stat", path);
    if (!value.empty() && !kStats.count(value))
      fail(parent["stat"], path + ".stat",
           "unknown stat '" + value + "'; expected n, mean, std, median, min or max");
    return value;
  }

  std::string format(const YAML::Node& parent, const std::string& path) const {
    const std::string value = optional_scalar(parent, "format", path);
    if (value.empty()) return value;
    try {
      check_number_format(value);
    } catch (const std::exception& e) {
      fail(parent["format"], path + ".format", e.what());
    }
    return value;
  }

  ColumnSpec column(const YAML::Node& node, const std::string& path) const {
    check_keys(node, path, kColumnKeys);
    ColumnSpec column;
    column.id = optional_scalar(node, "id", path);
    column.header = optional_scalar(node, "header", path);
    column.metric = optional_scalar(node, "metric", path);
    column.key = optional_scalar(node, "key", path);
    column.stat = stat(node, path);
    column.format = format(node, path);
    if (node["show_std"]) column.show_std = boolean(node["show_std"], path + ".show_std") ? 1 : 0;
    if (node["where"]) column.where = where(node["where"], path + ".where");
    if (node["ratio"]) {
      column.ratio = keys(node["ratio"], path + ".ratio");
      if (column.ratio.size() != 2)
        fail(node["ratio"], path + ".ratio", "expected [numerator column id, denominator column id]");
    }
    const int kinds = !column.metric.empty() + !column.key.empty() + !column.ratio.empty();
    if (kinds != 1) fail(node, path, "a column needs exactly one of metric, ratio, key");
    if (column.header.empty())
      column.header = !column.id.empty()       ? column.id
                      : !column.metric.empty() ? column.metric
                      : !column.key.empty()    ? column.key
                                               : column.ratio[0] + "/" + column.ratio[1];
    return column;
  }

  void check_ratio_references(const TableSpec& table, const YAML::Node& columns_node,
                              const std::string& path) const {
    std::vector<std::string> metric_ids;
    for (const auto& column : table.columns)
      if (!column.id.empty() && !column.metric.empty()) metric_ids.push_back(column.id);
    for (std::size_t i = 0; i < table.columns.size(); ++i)
      for (std::size_t side = 0; side < table.columns[i].ratio.size(); ++side) {
        const std::string& id = table.columns[i].ratio[side];
        if (std::find(metric_ids.begin(), metric_ids.end(), id) != metric_ids.end()) continue;
        const std::string at = path + "[" + std::to_string(i) + "].ratio";
        if (metric_ids.empty())
          fail(columns_node[i]["ratio"], at, "'" + id + "' is not the id of a metric column");
        fail(columns_node[i]["ratio"], at, "'" + id + "' is not the id of a metric column; did you mean '" +
                                               closest(id, metric_ids) + "'?");
      }
  }

  TableSpec table(const YAML::Node& node, const std::string& path) const {
    check_keys(node, path, kTableKeys);
    TableSpec table;
    table.name = optional_scalar(node, "name", path);
    if (!is_name(table.name, false)) fail(node, path + ".name", "needs a name made of [a-z0-9_]");
    table.title = node["title"] ? scalar(node["title"], path + ".title") : table.name;
    table.question = optional_scalar(node, "question", path);
    table.part = optional_scalar(node, "part", path);
    table.caption = optional_scalar(node, "caption", path);
    if (node["where"]) table.where = where(node["where"], path + ".where");
    if (!node["rows"]) fail(node, path + ".rows", "missing; name the key(s) that make rows");
    table.rows = keys(node["rows"], path + ".rows");
    table.stat = stat(node, path);
    table.format = format(node, path);
    if (node["show_std"]) table.show_std = boolean(node["show_std"], path + ".show_std");
    table.pivot = optional_scalar(node, "pivot", path);
    table.metric = optional_scalar(node, "metric", path);

    const bool has_columns = static_cast<bool>(node["columns"]);
    if (has_columns == !table.pivot.empty())
      fail(node, path, "give either columns or pivot (with metric), not both");
    if (!has_columns && table.metric.empty())
      fail(node, path + ".metric", "missing; a pivot table shows one metric");
    if (has_columns && !table.metric.empty())
      fail(node["metric"], path + ".metric", "only for pivot tables; each column names its metric");
    if (has_columns) {
      const YAML::Node columns = node["columns"];
      if (!columns.IsSequence() || columns.size() == 0)
        fail(columns, path + ".columns", "expected a list of columns");
      std::set<std::string> ids;
      for (std::size_t i = 0; i < columns.size(); ++i) {
        const std::string at = path + ".columns[" + std::to_string(i) + "]";
        table.columns.push_back(column(columns[i], at));
        const std::string& id = table.columns.back().id;
        if (!id.empty() && !ids.insert(id).second) fail(columns[i]["id"], at + ".id", "duplicate id");
      }
      check_ratio_references(table, columns, path + ".columns");
    }
    return table;
  }
};

// ---- building ---------------------------------------------------------------

std::string render_value(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) return shortest_number(value.get<double>());
  return value.dump();  // arrays, objects, null: compact JSON
}

std::optional<std::string> lookup(const json& record, const std::string& key) {
  for (const char* section : {"labels", "params"}) {
    const auto found = record.find(section);
    if (found == record.end() || !found->is_object()) continue;
    const auto value = found->find(key);
    if (value != found->end()) return render_value(*value);
  }
  return std::nullopt;
}

std::optional<double> parse_number(const std::string& text) {
  double value = 0;  // from_chars: no locale, no leading spaces, no hex
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Where-values come from YAML as text: "5" must match 5 and 5.0, "true" true.
bool values_equal(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const auto x = parse_number(a), y = parse_number(b);
  return x && y && *x == *y;
}

bool matches(const json& record, const std::map<std::string, std::string>& where) {
  for (const auto& [key, wanted] : where) {
    const auto value = lookup(record, key);
    if (!value || !values_equal(*value, wanted)) return false;
  }
  return true;
}

struct Cell {
  enum class Kind { missing, oom, error, number, text } kind = Kind::missing;
  double value = 0, std = 0;
  bool has_std = false, integer = false;
  std::string text;
};

bool failed(const json& record) { return record.value("status", std::string("ok")) != "ok"; }

const json* find_metric(const json& record, const std::string& metric) {
  const auto metrics = record.find("metrics");
  if (metrics == record.end() || !metrics->is_object()) return nullptr;
  const auto found = metrics->find(metric);
  return found == metrics->end() ? nullptr : &*found;
}

Cell metric_cell(const json& record, const std::string& metric, const std::string& stat) {
  Cell cell;
  if (failed(record)) {
    cell.kind = record.value("status", std::string()) == "oom" ? Cell::Kind::oom : Cell::Kind::error;
    return cell;
  }
  const json* found = find_metric(record, metric);
  if (!found || !found->is_object()) return cell;
  if (found->contains("text")) {
    cell.kind = Cell::Kind::text;
    cell.text = render_value((*found)["text"]);
  } else if (found->contains("value")) {  // a scalar metric has no stats to pick from
    if (!(*found)["value"].is_number()) return cell;
    cell.kind = Cell::Kind::number;
    cell.value = (*found)["value"].get<double>();
  } else if (found->contains(stat) && (*found)[stat].is_number()) {
    cell.kind = Cell::Kind::number;
    cell.value = (*found)[stat].get<double>();
    cell.integer = stat == "n";
    if (found->contains("std") && (*found)["std"].is_number()) {
      cell.has_std = true;
      cell.std = (*found)["std"].get<double>();
    }
  }
  return cell;
}

Cell ratio_cell(const Cell& numerator, const Cell& denominator) {
  for (const Cell* side : {&numerator, &denominator})
    if (side->kind == Cell::Kind::oom || side->kind == Cell::Kind::error) return *side;
  Cell cell;
  if (numerator.kind == Cell::Kind::number && denominator.kind == Cell::Kind::number &&
      denominator.value != 0) {
    cell.kind = Cell::Kind::number;
    cell.value = numerator.value / denominator.value;
  }
  return cell;
}

// A column with every default resolved; pivot values become where-filters.
struct Column {
  enum class Kind { metric, ratio, key } kind = Kind::metric;
  std::string header, metric, stat, format, key;
  bool show_std = false;
  std::map<std::string, std::string> where;
  std::size_t numerator = 0, denominator = 0;
};

std::string integer_text(double value) { return std::to_string(std::llround(value)); }

std::string display(const Cell& cell, const Column& column) {
  switch (cell.kind) {
    case Cell::Kind::missing: return "–";
    case Cell::Kind::oom: return "OOM";
    case Cell::Kind::error: return "error";
    case Cell::Kind::text: return cell.text;
    case Cell::Kind::number: break;
  }
  if (cell.integer) return integer_text(cell.value);
  std::string text = format_number(cell.value, column.format);
  if (column.show_std && cell.has_std) text += " ± " + format_number(cell.std, column.format);
  return text;
}

std::string csv_value(const Cell& cell, bool std_part) {
  if (cell.kind != Cell::Kind::number) return display(cell, Column{});
  if (std_part) return cell.has_std ? shortest_number(cell.std) : "–";
  return cell.integer ? integer_text(cell.value) : shortest_number(cell.value);
}

std::vector<Column> resolve_columns(const TableSpec& spec, const std::vector<const json*>& records) {
  const std::string default_stat = spec.stat.empty() ? "mean" : spec.stat;
  const std::string default_format = spec.format.empty() ? "%.3g" : spec.format;
  std::vector<Column> columns;
  if (!spec.pivot.empty()) {
    std::set<std::string> seen;
    for (const json* record : records) {
      const std::string value = *lookup(*record, spec.pivot);  // filtered on presence
      if (!seen.insert(value).second) continue;
      Column column;
      column.header = value;
      column.metric = spec.metric;
      column.stat = default_stat;
      column.format = default_format;
      column.show_std = spec.show_std;
      column.where = {{spec.pivot, value}};
      columns.push_back(column);
    }
    return columns;
  }
  std::map<std::string, std::size_t> index_of_id;
  for (std::size_t i = 0; i < spec.columns.size(); ++i) index_of_id[spec.columns[i].id] = i;
  for (const auto& column_spec : spec.columns) {
    Column column;
    column.kind = !column_spec.ratio.empty() ? Column::Kind::ratio
                  : !column_spec.key.empty() ? Column::Kind::key
                                             : Column::Kind::metric;
    column.header = column_spec.header;
    column.metric = column_spec.metric;
    column.key = column_spec.key;
    column.stat = column_spec.stat.empty() ? default_stat : column_spec.stat;
    column.format = column_spec.format.empty() ? default_format : column_spec.format;
    column.show_std = column_spec.show_std < 0 ? spec.show_std : column_spec.show_std == 1;
    column.where = column_spec.where;
    if (column.kind == Column::Kind::ratio) {
      column.numerator = index_of_id.at(column_spec.ratio[0]);
      column.denominator = index_of_id.at(column_spec.ratio[1]);
    }
    columns.push_back(column);
  }
  return columns;
}

// A record belongs to the table when it passes part/where, has every row key (or failed),
// and could fill some column (has the pivot key / passes a metric column's where).
bool belongs(const json& record, const TableSpec& spec) {
  if (!spec.part.empty() && record.value("part", std::string()) != spec.part) return false;
  if (!matches(record, spec.where)) return false;
  // A failed point never got to emit its labels: it still gets a row (blank
  // label cells) so OOM and error stay visible.
  const bool failed = record.value("status", std::string("ok")) != "ok";
  for (const auto& key : spec.rows)
    if (!lookup(record, key) && !failed) return false;
  if (!spec.pivot.empty()) return lookup(record, spec.pivot).has_value();
  bool any_metric_column = false;
  for (const auto& column : spec.columns) {
    if (column.metric.empty()) continue;
    any_metric_column = true;
    if (matches(record, column.where)) return true;
  }
  return !any_metric_column;
}

// ---- caption ----------------------------------------------------------------

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// Distinct non-empty values in first-appearance order.
template <typename Field>
std::vector<std::string> distinct(const std::vector<const json*>& records, Field field) {
  std::vector<std::string> values;
  for (const json* record : records) {
    const std::string value = field(*record);
    if (!value.empty() && std::find(values.begin(), values.end(), value) == values.end())
      values.push_back(value);
  }
  return values;
}

std::string env_text(const json& record, const char* key) {
  const auto env = record.find("env");
  if (env == record.end() || !env->is_object()) return "";
  const auto value = env->find(key);
  return value == env->end() || value->is_null() ? "" : render_value(*value);
}

std::string param_text(const json& record, const char* key) {
  const auto params = record.find("params");
  if (params == record.end() || !params->is_object()) return "";
  const auto value = params->find(key);
  return value == params->end() ? "" : render_value(*value);
}

std::string device_name(const json& record) {
  std::string name = env_text(record, "gpu");
  if (name.empty()) name = env_text(record, "cpu");
  const std::string device = env_text(record, "device");
  if (name.empty() || device.empty()) return name + device;
  return name + " (" + device + ")";
}

// "NVIDIA H100 80GB HBM3 (cuda), driver 580.159.04, CUDA 13.0, LibTorch 2.11.0"
std::string machine_clause(const std::vector<const json*>& records) {
  std::vector<std::string> parts;
  const auto add = [&](const std::string& prefix, const std::vector<std::string>& values) {
    if (!values.empty()) parts.push_back(prefix + join(values, " / "));
  };
  add("", distinct(records, device_name));
  add("driver ", distinct(records, [](const json& r) { return env_text(r, "driver"); }));
  add("CUDA ", distinct(records, [](const json& r) { return env_text(r, "cuda_runtime"); }));
  add("LibTorch ", distinct(records, [](const json& r) { return env_text(r, "libtorch"); }));
  return join(parts, ", ");
}

std::string steps_clause(const std::vector<const json*>& records) {
  const auto warmup = distinct(records, [](const json& r) { return param_text(r, "measure.warmup_steps"); });
  const auto measured =
      distinct(records, [](const json& r) { return param_text(r, "measure.measured_steps"); });
  std::vector<std::string> parts;
  if (warmup.size() == 1) parts.push_back("warm-up " + warmup[0]);
  if (warmup.size() > 1) parts.push_back("warm-up varies by row/column");
  if (measured.size() == 1) parts.push_back("measured " + measured[0] + " steps");
  if (measured.size() > 1) parts.push_back("measured steps vary by row/column");
  return join(parts, ", ");
}

// Params equal in every record, minus what the table shows and what says nothing
// about the setup (seed, device, measure.*, list values).
std::string fixed_clause(const std::vector<const json*>& records,
                         const std::set<std::string>& shown_keys) {
  const auto ignored = [&](const std::string& key, const json& value) {
    return shown_keys.count(key) || key == "seed" || key == "device" ||
           key.rfind("measure.", 0) == 0 || value.is_array() || value.is_object();
  };
  std::map<std::string, std::string> fixed;  // sorted by key: deterministic
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json params = records[i]->value("params", json::object());
    if (i == 0) {
      for (const auto& [key, value] : params.items())
        if (!ignored(key, value)) fixed[key] = render_value(value);
      continue;
    }
    for (auto it = fixed.begin(); it != fixed.end();) {
      const auto value = params.find(it->first);
      const bool same = value != params.end() && render_value(*value) == it->second;
      it = same ? std::next(it) : fixed.erase(it);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [key, value] : fixed) parts.push_back(key + "=" + value);
  return parts.empty() ? "" : "fixed: " + join(parts, ", ");
}

// Pivot headers are key values, so say what the cells hold and in which unit.
std::string cells_sentence(const TableSpec& spec, const std::vector<const json*>& records) {
  if (spec.pivot.empty()) return "";
  std::string what = spec.metric;
  for (const json* record : records) {
    const json* metric = find_metric(*record, spec.metric);
    if (!metric || !metric->is_object()) continue;
    if (metric->contains("mean")) {
      what += " " + (spec.stat.empty() ? std::string("mean") : spec.stat);
      if (spec.show_std) what += " ± std";
    }
    const std::string unit = metric->value("unit", std::string());
    if (!unit.empty()) what += " (" + unit + ")";
    break;
  }
  return "Cells: " + what + " by " + spec.pivot + ".";
}

std::string one_line(std::string text) {
  std::replace_if(text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

std::string caption(const TableSpec& spec, const std::vector<const json*>& records,
                    const std::set<std::string>& shown_keys) {
  std::vector<std::string> sentences;
  if (const std::string author = one_line(spec.caption); !author.empty()) sentences.push_back(author);
  if (const std::string cells = cells_sentence(spec, records); !cells.empty()) sentences.push_back(cells);
  std::vector<std::string> setup;
  for (const std::string& clause :
       {machine_clause(records), steps_clause(records), fixed_clause(records, shown_keys)})
    if (!clause.empty()) setup.push_back(clause);
  if (records.empty()) sentences.push_back("No matching records yet.");
  else if (!setup.empty()) sentences.push_back("Setup: " + join(setup, "; ") + ".");
  if (!spec.question.empty()) sentences.push_back("Question: " + spec.question + ".");
  return join(sentences, " ");
}

}  // namespace

ReportSpec parse_report_spec(const YAML::Node& report_node, const std::string& file) {
  const SpecParser parser{file};
  parser.check_keys(report_node, "report", kReportKeys);
  ReportSpec spec;
  spec.id = parser.optional_scalar(report_node, "id", "report");
  if (!is_name(spec.id, true))
    parser.fail(report_node, "report.id", "needs an id made of [A-Za-z0-9_-] (the file name)");
  spec.title = report_node["title"] ? parser.scalar(report_node["title"], "report.title") : spec.id;
  const YAML::Node tables = report_node["tables"];
  if (!tables || !tables.IsSequence() || tables.size() == 0)
    parser.fail(tables ? tables : report_node, "report.tables", "expected a list of tables");
  std::set<std::string> names;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const std::string path = "report.tables[" + std::to_string(i) + "]";
    spec.tables.push_back(parser.table(tables[i], path));
    if (!names.insert(spec.tables.back().name).second)
      parser.fail(tables[i]["name"], path + ".name", "duplicate table name in this report");
  }
  return spec;
}

BuiltTable build_table(const TableSpec& spec, const std::vector<json>& records) {
  std::vector<const json*> members;
  for (const auto& record : records)
    if (belongs(record, spec)) members.push_back(&record);

  // Rows in first-appearance order; each member remembers its row.
  std::map<std::vector<std::string>, std::size_t> row_of_keys;
  std::vector<std::vector<std::string>> row_keys;
  std::vector<std::size_t> member_row;
  for (const json* record : members) {
    std::vector<std::string> keys;
    for (const auto& key : spec.rows) keys.push_back(lookup(*record, key).value_or(""));
    const auto [it, inserted] = row_of_keys.emplace(keys, row_keys.size());
    if (inserted) row_keys.push_back(keys);
    member_row.push_back(it->second);
  }

  const std::vector<Column> columns = resolve_columns(spec, members);
  std::vector<std::vector<Cell>> grid(row_keys.size(), std::vector<Cell>(columns.size()));
  for (std::size_t row = 0; row < row_keys.size(); ++row) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const Column& column = columns[c];
      if (column.kind == Column::Kind::ratio) continue;  // needs its inputs first
      // Walk backwards: a point re-run later (appended) wins over the earlier one.
      for (std::size_t m = members.size(); m-- > 0;) {
        const json& record = *members[m];
        if (member_row[m] != row || !matches(record, column.where)) continue;
        if (column.kind == Column::Kind::key) {
          if (const auto value = lookup(record, column.key)) {
            grid[row][c].kind = Cell::Kind::text;
            grid[row][c].text = *value;
            break;
          }
        } else if (failed(record) || find_metric(record, column.metric)) {
          // Records of one point may carry different metrics; skip those without ours.
          grid[row][c] = metric_cell(record, column.metric, column.stat);
          break;
        }
      }
    }
    for (std::size_t c = 0; c < columns.size(); ++c)
      if (columns[c].kind == Column::Kind::ratio)
        grid[row][c] = ratio_cell(grid[row][columns[c].numerator], grid[row][columns[c].denominator]);
  }

  BuiltTable table;
  table.name = spec.name;
  table.title = spec.title;
  table.row_key_columns = spec.rows.size();
  table.header = spec.rows;
  table.csv_header = spec.rows;
  for (const auto& column : columns) {
    table.header.push_back(column.header);
    table.csv_header.push_back(column.header);
    if (column.show_std) table.csv_header.push_back(column.header + " std");
  }
  for (std::size_t row = 0; row < row_keys.size(); ++row) {
    std::vector<std::string> cells = row_keys[row], csv = row_keys[row];
    for (std::size_t c = 0; c < columns.size(); ++c) {
      cells.push_back(display(grid[row][c], columns[c]));
      csv.push_back(csv_value(grid[row][c], false));
      if (columns[c].show_std) csv.push_back(csv_value(grid[row][c], true));
    }
    table.cells.push_back(std::move(cells));
    table.csv_rows.push_back(std::move(csv));
  }

  std::set<std::string> shown_keys(spec.rows.begin(), spec.rows.end());
  if (!spec.pivot.empty()) shown_keys.insert(spec.pivot);
  for (const auto& column : spec.columns) {
    if (!column.key.empty()) shown_keys.insert(column.key);
    for (const auto& [key, value] : column.where) shown_keys.insert(key);
  }
  table.caption = caption(spec, members, shown_keys);
  return table;
}

}  // namespace runner::report
