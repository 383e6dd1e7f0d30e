// Parsing and checking the `report:` section of an experiment file.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "base/text_distance.hpp"
#include "report/report.hpp"

namespace runner::report {
namespace {

const std::vector<std::string> kReportKeys = {"id", "title", "question", "tables", "figures", "values"};
const std::vector<std::string> kValueKeys = {"name", "expr", "format"};
const std::vector<std::string> kFigureKeys = {
    "name", "title", "question", "part", "where", "kind", "x", "series", "panel", "metric",
    "stat", "logx", "logy", "error_bars", "xlabel", "ylabel", "legend", "caption"};
const std::set<std::string> kFigureKinds = {"line", "bar"};
const std::vector<std::string> kTableKeys = {
    "name", "title", "question", "part", "where", "rows", "columns",
    "pivot", "metric", "stat", "format", "show_std", "noise", "noise_threshold", "caption"};
const std::vector<std::string> kColumnKeys = {"id",       "header", "metric", "stat", "format",
                                              "show_std", "noise",  "where",  "ratio", "key", "link"};
const std::set<std::string> kNoiseModes = {"marker", "percent", "off"};
const std::set<std::string> kStats = {"n", "mean", "std", "median", "min", "max"};

// Report ids and table names become file names (reports/<id>/<id>.<table>.csv, at
// most 255 bytes): each at most this long, so a long one fails here, before any point ran.
constexpr std::size_t kMaxNameLength = 100;

bool is_name(const std::string& text, bool allow_upper_and_dash) {
  if (text.empty() || text.size() > kMaxNameLength) return false;
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
    throw SpecError(where + ": " + path + ": " + what);
  }

  void check_keys(const YAML::Node& node, const std::string& path,
                  const std::vector<std::string>& valid) const {
    if (!node.IsDefined() || !node.IsMap()) fail(node, path, "expected a mapping");
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(valid.begin(), valid.end(), key) == valid.end())
        fail(entry.first, path + "." + key,
             "unknown key" + suggestion(key, valid));
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

  std::string noise(const YAML::Node& parent, const std::string& path) const {
    const std::string value = optional_scalar(parent, "noise", path);
    if (!value.empty() && !kNoiseModes.count(value))
      fail(parent["noise"], path + ".noise", "unknown noise mode '" + value + "'; expected marker, percent or off");
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
    column.noise = noise(node, path);
    if (node["show_std"]) column.show_std = boolean(node["show_std"], path + ".show_std") ? 1 : 0;
    if (node["where"]) column.where = where(node["where"], path + ".where");
    if (node["ratio"]) {
      column.ratio = keys(node["ratio"], path + ".ratio");
      if (column.ratio.size() != 2)
        fail(node["ratio"], path + ".ratio", "expected [numerator column id, denominator column id]");
    }
    const int kinds = !column.metric.empty() + !column.key.empty() + !column.ratio.empty();
    if (kinds != 1) fail(node, path, "a column needs exactly one of metric, ratio, key");
    column.link = optional_scalar(node, "link", path);
    if (node["link"]) {
      if (column.metric.empty())
        fail(node["link"], path + ".link", "link: belongs to a metric column whose text names a file");
      while (column.link.size() > 1 && column.link.back() == '/') column.link.pop_back();
      const std::filesystem::path folder(column.link);
      const bool outside = std::any_of(folder.begin(), folder.end(), [](const auto& part) { return part == ".."; });
      if (column.link.empty() || folder.is_absolute() || outside)
        fail(node["link"], path + ".link", "'" + column.link + "': expected a folder inside the report's folder, "
             "e.g. figures");
    }
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
        fail(columns_node[i]["ratio"], at, "'" + id + "' is not the id of a metric column" +
                                               suggestion(id, metric_ids));
      }
  }

  // The fields tables and figures share: name (title defaults to it), question, part, caption.
  template <typename Spec>
  void named(Spec& spec, const YAML::Node& node, const std::string& path) const {
    spec.name = optional_scalar(node, "name", path);
    if (!is_name(spec.name, false))
      fail(node, path + ".name", "needs a name of at most 100 characters from [a-z0-9_]");
    spec.title = node["title"] ? scalar(node["title"], path + ".title") : spec.name;
    spec.question = optional_scalar(node, "question", path);
    if (node["part"]) spec.parts.names = keys(node["part"], path + ".part");
    spec.caption = optional_scalar(node, "caption", path);
  }

  TableSpec table(const YAML::Node& node, const std::string& path) const {
    check_keys(node, path, kTableKeys);
    TableSpec table;
    named(table, node, path);
    if (node["where"]) table.where = where(node["where"], path + ".where");
    if (!node["rows"]) fail(node, path + ".rows", "missing; name the key(s) that make rows");
    table.rows = keys(node["rows"], path + ".rows");
    table.stat = stat(node, path);
    table.format = format(node, path);
    if (node["show_std"]) table.show_std = boolean(node["show_std"], path + ".show_std");
    if (const std::string mode = noise(node, path); !mode.empty()) table.noise = mode;
    if (node["noise_threshold"]) {
      const std::string text = scalar(node["noise_threshold"], path + ".noise_threshold");
      char* end = nullptr;
      table.noise_threshold = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(table.noise_threshold > 0))
        fail(node["noise_threshold"], path + ".noise_threshold", "expected a positive number, e.g. 0.02 for 2%");
    }
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

  FigureSpec figure(const YAML::Node& node, const std::string& path) const {
    check_keys(node, path, kFigureKeys);
    FigureSpec figure;
    named(figure, node, path);
    if (node["kind"]) {
      figure.kind = scalar(node["kind"], path + ".kind");
      if (!kFigureKinds.count(figure.kind))
        fail(node["kind"], path + ".kind", "unknown kind '" + figure.kind + "'; expected line or bar");
    }
    if (node["where"]) figure.where = where(node["where"], path + ".where");
    figure.x = optional_scalar(node, "x", path);
    if (figure.x.empty()) fail(node, path + ".x", "missing; name the key on the x axis, e.g. x: size_mb");
    if (node["series"]) figure.series = keys(node["series"], path + ".series");
    figure.panel = optional_scalar(node, "panel", path);
    figure.metric = optional_scalar(node, "metric", path);
    if (figure.metric.empty()) fail(node, path + ".metric", "missing; name the metric on the y axis, e.g. metric: step_ms");
    figure.stat = stat(node, path);
    if (node["logx"]) figure.logx = boolean(node["logx"], path + ".logx");
    if (node["logy"]) figure.logy = boolean(node["logy"], path + ".logy");
    if (node["error_bars"]) figure.error_bars = boolean(node["error_bars"], path + ".error_bars");
    if (figure.kind == "bar" && figure.logx)
      fail(node["logx"], path + ".logx", "a bar figure has categories on x; drop logx or use kind: line");
    figure.xlabel = node["xlabel"] ? scalar(node["xlabel"], path + ".xlabel") : figure.x;
    figure.ylabel = node["ylabel"] ? scalar(node["ylabel"], path + ".ylabel") : figure.metric;
    if (node["legend"]) figure.legend = where(node["legend"], path + ".legend");
    return figure;
  }
};


}  // namespace

ReportSpec parse_report_spec(const YAML::Node& report_node, const std::string& file) {
  const SpecParser parser{file};
  parser.check_keys(report_node, "report", kReportKeys);
  ReportSpec spec;
  spec.id = parser.optional_scalar(report_node, "id", "report");
  if (!is_name(spec.id, true))
    parser.fail(report_node, "report.id", "needs an id of at most 100 characters from [A-Za-z0-9_-] (the file name)");
  spec.title = report_node["title"] ? parser.scalar(report_node["title"], "report.title") : spec.id;
  if (report_node["question"]) spec.question = parser.scalar(report_node["question"], "report.question");
  const YAML::Node tables = report_node["tables"];
  const YAML::Node figures = report_node["figures"];
  if (figures && (!figures.IsSequence() || figures.size() == 0))
    parser.fail(figures, "report.figures", "expected a list of figures");
  if ((tables || !figures) && (!tables || !tables.IsSequence() || tables.size() == 0))
    parser.fail(tables ? tables : report_node, "report.tables", "expected a list of tables");
  std::set<std::string> names;
  for (std::size_t i = 0; figures && i < figures.size(); ++i) {
    const std::string path = "report.figures[" + std::to_string(i) + "]";
    spec.figures.push_back(parser.figure(figures[i], path));
    if (!names.insert(spec.figures.back().name).second)
      parser.fail(figures[i]["name"], path + ".name", "duplicate figure name in this report");
  }
  names.clear();
  if (const YAML::Node values = report_node["values"]) {
    if (!values.IsSequence()) parser.fail(values, "report.values", "expected a list of {name, expr, format}");
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::string path = "report.values[" + std::to_string(i) + "]";
      parser.check_keys(values[i], path, kValueKeys);
      ValueSpec v;
      v.name = parser.optional_scalar(values[i], "name", path);
      if (!is_name(v.name, false))
        parser.fail(values[i], path + ".name", "needs a name of at most 100 characters from [a-z0-9_]");
      if (!names.insert(v.name).second) parser.fail(values[i]["name"], path + ".name", "duplicate value name");
      v.expr = parser.optional_scalar(values[i], "expr", path);
      if (v.expr.empty()) parser.fail(values[i], path + ".expr", "missing; e.g. expr: 'cell(\"step\", \"xl\", \"naive\") / 1000'");
      if (values[i]["format"]) {
        v.format = parser.scalar(values[i]["format"], path + ".format");
        try {
          check_number_format(v.format);
        } catch (const std::exception& e) {
          parser.fail(values[i]["format"], path + ".format", e.what());
        }
      }
      spec.values.push_back(v);
    }
  }
  names.clear();
  for (std::size_t i = 0; tables && i < tables.size(); ++i) {
    const std::string path = "report.tables[" + std::to_string(i) + "]";
    spec.tables.push_back(parser.table(tables[i], path));
    if (!names.insert(spec.tables.back().name).second)
      parser.fail(tables[i]["name"], path + ".name", "duplicate table name in this report");
  }
  check_values(spec, [&](std::size_t i, const std::string& what) {
    const std::string path = "report.values[" + std::to_string(i) + "].expr";
    parser.fail(report_node["values"][i]["expr"], path, what);
  });
  return spec;
}

}  // namespace runner::report
