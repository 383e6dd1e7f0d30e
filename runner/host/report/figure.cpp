// Figures: the points a figure spec selects from stored records, its caption, and the
// hand-off to scripts/figures/plot.py (matplotlib), which draws SVG, PNG and PDF.
// The selection follows the tables' rules (part, where, the last record of a point
// wins, interrupted points never count) and plots only aggregate records (no
// `rank` label), so a figure and a table of the same run show the same numbers.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "report/process.hpp"
#include "report/record_fields.hpp"
#include "report/report.hpp"

namespace runner::report {
namespace {

using nlohmann::json;

// A figure may split by part (e.g. C++ and PyTorch parts of one run), so "part" is a key too.
std::optional<std::string> figure_key(const StoredRecord& record, const std::string& key) {
  if (key == "part") return record.part;
  return detail::lookup(record, key);
}

bool is_number(const std::string& text, double* out = nullptr) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return false;
  if (out) *out = value;
  return true;
}

bool where_matches(const StoredRecord& record, const std::map<std::string, std::string>& where) {
  for (const auto& [key, wanted] : where) {
    const auto value = figure_key(record, key);
    double a = 0, b = 0;
    if (!value || !(*value == wanted || (is_number(*value, &a) && is_number(wanted, &b) && a == b))) return false;
  }
  return true;
}

bool selected(const StoredRecord& record, const FigureSpec& spec) {
  if (record.status == RecordStatus::interrupted) return false;
  if (!spec.parts.holds(record.part)) return false;
  if (record.labels.contains("rank")) return false;
  return where_matches(record, spec.where);
}

std::string joined_keys(const StoredRecord& record, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : " ") + figure_key(record, key).value_or("?");
  return out;
}

// y (and std) of a record: a stat of a stats metric, or a scalar's value.
bool metric_value(const StoredRecord& record, const FigureSpec& spec, double* y, double* std) {
  const Metric* metric = record.metric(spec.metric);
  if (!metric) return false;
  if (const auto* value = std::get_if<double>(&metric->value)) {
    if (std::isnan(*value)) return false;
    *y = *value;
    *std = -1;
    return true;
  }
  const auto* stats = std::get_if<Stats>(&metric->value);
  if (!stats) return false;
  *y = stat_named(*stats, spec.stat.empty() ? "mean" : spec.stat);
  *std = std::isnan(stats->std) ? -1 : stats->std;
  return !std::isnan(*y);
}

std::string python_interpreter() {
  if (const char* env = std::getenv("RUNNER_PYTHON"); env && *env) return env;
#ifdef RUNNER_PYTHON_DEFAULT
  if (*RUNNER_PYTHON_DEFAULT) return RUNNER_PYTHON_DEFAULT;
#endif
  return "python3";
}

std::filesystem::path plot_script() {
  if (const char* env = std::getenv("RUNNER_PLOT_SCRIPT"); env && *env) return env;
#ifdef RUNNER_SOURCE_DIR
  return std::filesystem::path(RUNNER_SOURCE_DIR) / "scripts/figures/plot.py";
#else
  return "scripts/figures/plot.py";
#endif
}

std::string figure_stem(const FigureSpec& spec, const std::string& report_id) {
  return report_id + "-" + spec.name;
}

}  // namespace

json figure_data(const FigureSpec& spec, const std::vector<StoredRecord>& records) {
  // (panel, series, x) -> the last record's point, in first-appearance order.
  std::vector<std::string> panels, series_order;
  std::map<std::string, std::vector<std::string>> series_of_panel;
  std::map<std::tuple<std::string, std::string, std::string>, json> points;
  std::vector<std::tuple<std::string, std::string, std::string>> point_order;
  std::vector<std::string> x_values;
  std::map<std::string, int> failed;  // status -> count
  std::map<std::string, json> series_parts;  // series label -> its key values (colour by the first, style by the rest)
  bool numeric_x = true;
  for (const StoredRecord& record : records) {
    if (!selected(record, spec)) continue;
    const auto x = figure_key(record, spec.x);
    if (record.failed()) {
      ++failed[record.status_text()];
      continue;
    }
    double y = 0, std = -1;
    if (!x || !metric_value(record, spec, &y, &std)) continue;
    const std::string panel = spec.panel.empty() ? "" : figure_key(record, spec.panel).value_or("?");
    const std::string series_text = joined_keys(record, spec.series);
    std::string series = series_text;
    if (const auto named = spec.legend.find(series); named != spec.legend.end()) series = named->second;
    json& parts = series_parts[series];
    if (parts.is_null()) {
      parts = json::array();
      for (const auto& key : spec.series) parts.push_back(figure_key(record, key).value_or("?"));
    }
    if (std::find(panels.begin(), panels.end(), panel) == panels.end()) panels.push_back(panel);
    auto& in_panel = series_of_panel[panel];
    if (std::find(in_panel.begin(), in_panel.end(), series) == in_panel.end()) in_panel.push_back(series);
    if (std::find(x_values.begin(), x_values.end(), *x) == x_values.end()) x_values.push_back(*x);
    numeric_x = numeric_x && is_number(*x);
    json point = {{"x", *x}, {"y", y}};
    if (spec.error_bars && std >= 0) point["std"] = std;
    const auto key = std::make_tuple(panel, series, *x);
    if (!points.count(key)) point_order.push_back(key);
    points[key] = point;  // a point re-run later (appended) wins
  }
  json out = {{"name", spec.name},       {"kind", spec.kind},     {"title", spec.title},
              {"xlabel", spec.xlabel},   {"ylabel", spec.ylabel}, {"logx", spec.logx},
              {"logy", spec.logy},       {"panels", json::array()}};
  out["categories"] = spec.kind == "bar" || !numeric_x ? json(x_values) : json::array();
  for (const auto& panel : panels) {
    json panel_json = {{"title", spec.panel.empty() ? "" : spec.panel + " = " + panel}, {"series", json::array()}};
    for (const auto& series : series_of_panel[panel]) {
      json series_json = {{"label", series}, {"parts", series_parts[series]}, {"points", json::array()}};
      for (const auto& key : point_order) {
        if (std::get<0>(key) != panel || std::get<1>(key) != series) continue;
        json point = points[key];
        if (numeric_x && spec.kind == "line") point["x"] = std::stod(point["x"].get<std::string>());
        series_json["points"].push_back(point);
      }
      panel_json["series"].push_back(series_json);
    }
    out["panels"].push_back(panel_json);
  }
  json not_plotted = json::object();
  for (const auto& [status, count] : failed) not_plotted[status] = count;
  out["not_plotted"] = not_plotted;
  return out;
}

std::string figure_caption(const FigureSpec& spec, const std::vector<StoredRecord>& records) {
  TableSpec as_table;  // the setup sentence is the tables' own
  as_table.caption = spec.caption;
  as_table.question = spec.question;
  std::vector<const StoredRecord*> members;
  for (const StoredRecord& record : records)
    if (selected(record, spec) && figure_key(record, spec.x)) members.push_back(&record);
  std::set<std::string> shown = {spec.x};
  shown.insert(spec.series.begin(), spec.series.end());
  if (!spec.panel.empty()) shown.insert(spec.panel);
  for (const auto& [key, value] : spec.where) shown.insert(key);
  std::string caption = detail::caption(as_table, members, shown);
  const std::string stat = spec.stat.empty() ? "mean" : spec.stat;
  caption += " Points: " + spec.metric + " (" + stat + (spec.error_bars ? ", bars ± std" : "") + ") by " + spec.x +
             (spec.series.empty() ? "" : "; one series per " + [&] {
               std::string keys;
               for (const auto& k : spec.series) keys += (keys.empty() ? "" : " × ") + k;
               return keys;
             }()) + ".";
  const json data = figure_data(spec, records);
  std::string failed;
  for (const auto& [status, count] : data["not_plotted"].items())
    failed += (failed.empty() ? "" : ", ") + std::to_string(count.get<int>()) + " " + status;
  if (!failed.empty()) caption += " Not plotted (no value): " + failed + " point(s).";
  return caption;
}

std::string figure_markdown(const FigureSpec& spec, const std::string& report_id, const std::string& caption) {
  return "## " + spec.title + "\n\n![" + spec.title + "](figures/" + figure_stem(spec, report_id) + ".svg)\n\n*" +
         caption + "*\n";
}

std::string figure_latex(const FigureSpec& spec, const std::string& report_id, const std::string& caption) {
  // Relative to the reports directory: the writeup there \input{}s <id>/<id>.tex, and LaTeX resolves from there.
  const std::string file = report_id + "/figures/" + figure_stem(spec, report_id) + ".pdf";
  return "\\begin{figure}[ht]\\centering\n\\IfFileExists{" + file + "}{\\includegraphics[width=" + std::string(spec.panel.empty() ? "0.75" : "") + "\\linewidth]{" + file +
         "}}{\\fbox{\\parbox{0.9\\linewidth}{\\centering Figure not drawn: " + latex_escape(file) +
         " is missing (runner report draws it with matplotlib; see scripts/setup.sh).}}}\n\\caption{" +
         latex_escape(spec.title + ". " + caption) + "}\n\\label{fig:" + report_id + ":" + spec.name +
         "}\n\\end{figure}\n";
}

FigureOutcome draw_figures(const ReportSpec& spec, const std::vector<StoredRecord>& records,
                           const std::filesystem::path& report_dir) {
  FigureOutcome outcome;
  // `runner report --check` compares tables and values; drawing is matplotlib's business.
  if (spec.figures.empty() || std::getenv("RUNNER_SKIP_FIGURES") != nullptr) return outcome;
  const std::filesystem::path dir = report_dir / "figures";
  std::filesystem::create_directories(dir);
  json job = {{"figures", json::array()}};
  for (const auto& figure : spec.figures) {
    json data = figure_data(figure, records);
    if (data["panels"].empty()) continue;  // nothing to draw; the caption says why
    const std::filesystem::path stem = dir / figure_stem(figure, spec.id);
    data["outputs"] = json::array();
    // The Markdown embeds the SVG and the LaTeX the PDF; a PNG would only add bytes to every clone.
    for (const char* ext : {".svg", ".pdf"}) data["outputs"].push_back(stem.string() + ext);
    job["figures"].push_back(data);
  }
  if (job["figures"].empty()) return outcome;
  const std::filesystem::path job_file = dir / ("." + spec.id + ".figures.json");
  const std::filesystem::path log_file = dir / ("." + spec.id + ".figures.log");
  {
    std::ofstream out(job_file, std::ios::binary | std::ios::trunc);
    out << job.dump(1);
  }
  const std::string python = python_interpreter();
  const int status = detail::run_program({python, plot_script().string(), job_file.string()}, log_file);
  const std::string log = detail::last_log_line(log_file);
  std::filesystem::remove(job_file);
  std::filesystem::remove(log_file);
  if (status == -1 || status == 127) {
    outcome.problem = "figures not drawn: cannot run Python '" + python + "' (set RUNNER_PYTHON or run scripts/setup.sh)";
  } else if (status != 0) {
    outcome.problem = "figures not drawn: " + (log.empty() ? "plot.py exited with " + std::to_string(status) : log);
  } else {
    for (const auto& figure : job["figures"])
      for (const auto& path : figure["outputs"]) outcome.written.emplace_back(path.get<std::string>());
  }
  return outcome;
}

}  // namespace runner::report
