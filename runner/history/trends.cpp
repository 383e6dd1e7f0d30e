#include "history/trends.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "history/compare.hpp"
#include "history/time_text.hpp"
#include "history/verdict_stats.hpp"

namespace runner::history {
namespace fs = std::filesystem;

namespace {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A page file name from an experiment name: letters, digits, - and _ only.
std::string page_name(const std::string& experiment) {
  std::string s;
  for (char c : experiment) s += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return s + ".html";
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// An x tick: the run's date and short commit. The x axis is commit order (runs
// by start time, oldest left); the run id is in each marker's tooltip.
std::string run_tick(const RunInfo& r) {
  const std::string when = r.started.size() >= 10 ? r.started.substr(5, 5) : r.started;
  return when + " " + (r.git_commit.empty() ? std::string("?") : r.git_commit.substr(0, 7));
}

// Points in the order a reader expects: parameters compared as numbers when
// both are numbers (size=128 before size=1024), else as text.
bool numeric_less(const nlohmann::json& a, const nlohmann::json& b) {
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end() && ib != b.end(); ++ia, ++ib) {
    if (ia.key() != ib.key()) return ia.key() < ib.key();
    const auto& va = ia.value();
    const auto& vb = ib.value();
    if (va == vb) continue;
    if (va.is_number() && vb.is_number()) return va.get<double>() < vb.get<double>();
    return va.dump() < vb.dump();
  }
  return a.size() < b.size();
}

struct Sample {
  const RunInfo* run;
  const MetricValue* value;
  double lo, hi;
  std::string verdict;  // a step detected at this run (change point of the series)
  bool regression = false;
};

const char* kStyle = R"css(
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #ddd; padding: 6px; }
figcaption { font-size: 0.8em; max-width: 340px; overflow-wrap: anywhere; }
svg .band { fill: #9ecae1; fill-opacity: 0.45; stroke: none; }
svg .trend { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
svg .run { fill: #1f77b4; } svg .regression { fill: #d62728; } svg .improvement { fill: #2ca02c; }
svg .axis { stroke: #999; stroke-width: 1; } svg text { font-size: 10px; fill: #555; }
#filters { margin: 0.5em 0 1em; font-size: 0.9em; } #filters label { margin-right: 1em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
.bad { color: #d62728; font-weight: bold; }
)css";

// Counts the plots after load, and reports any plot without a drawn trend as a
// console error, so a headless browser test can tell a broken page.
const char* kCheckScript = R"js(
window.addEventListener('load', () => {
  const plots = document.querySelectorAll('svg.trend-plot');
  let drawn = 0;
  plots.forEach(svg => {
    const line = svg.querySelector('.trend');
    const box = line ? line.getBBox() : null;
    if (box && (box.width > 0 || svg.querySelectorAll('.run, .regression, .improvement').length === 1)) drawn++;
    else console.error('plot not drawn: ' + svg.getAttribute('aria-label'));
  });
  document.body.setAttribute('data-plots', String(plots.length));
  document.body.setAttribute('data-plots-drawn', String(drawn));
});
)js";

// The filters above the charts: a part and any parameter's value (selects, or
// the page's #part=NAME&KEY=VALUE, kept in the address so a filtered view can
// be shared). A chart shows when its part and every chosen parameter match;
// a part with no chart shown is hidden. Applied after the check above ran.
const char* kFilterScript = R"js(
function applyFilters() {
  const chosen = {};
  document.querySelectorAll('#filters select').forEach(s => { if (s.value !== '') chosen[s.name] = s.value; });
  let shown = 0;
  document.querySelectorAll('figure[data-part]').forEach(f => {
    const params = JSON.parse(f.dataset.params);
    const ok = Object.entries(chosen).every(([k, v]) => k === 'part' ? f.dataset.part === v : params[k] === v);
    f.hidden = !ok;
    if (ok) shown++;
  });
  document.querySelectorAll('section.part').forEach(s => { s.hidden = !s.querySelector('figure:not([hidden])'); });
  document.body.setAttribute('data-plots-shown', String(shown));
  document.getElementById('shown').textContent = shown + ' of ' + document.querySelectorAll('figure[data-part]').length + ' charts shown';
  const hash = new URLSearchParams(chosen).toString();
  history.replaceState(null, '', hash ? '#' + hash : location.pathname);
}
window.addEventListener('load', () => {
  const asked = new URLSearchParams(location.hash.slice(1));
  document.querySelectorAll('#filters select').forEach(s => {
    const v = asked.get(s.name);
    if (v !== null && [...s.options].some(o => o.value === v)) s.value = v;
    s.addEventListener('change', applyFilters);
  });
  applyFilters();
});
)js";

std::string param_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The parameters a point is filtered by: all but the device and measure.*.
bool filterable(const std::string& key) { return key != "device" && key.rfind("measure.", 0) != 0; }

// One value, no spread, in every run.
bool is_constant(const std::vector<Sample>& s) {
  return s.size() >= 2 && std::all_of(s.begin(), s.end(), [&](const Sample& x) {
    return x.value->center == s.front().value->center && x.lo == x.hi && x.value->std == 0;
  });
}

void write_plot(std::ostream& out, const std::string& title, const std::string& unit, const std::vector<Sample>& s,
                const std::string& figure_attributes) {
  const double W = 340, H = 150, left = 52, right = 8, top = 8, bottom = 22;
  double lo = s.front().lo, hi = s.front().hi;
  for (const auto& x : s) {
    lo = std::min({lo, x.lo, x.value->center});
    hi = std::max({hi, x.hi, x.value->center});
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    lo -= 0.5 * std::max(std::fabs(lo), 1e-9);
    hi += 0.5 * std::max(std::fabs(hi), 1e-9);
  }
  const double pad = 0.05 * (hi - lo);
  // Times, rates and sizes are never negative: the axis stops at zero.
  const bool non_negative = lo >= 0;
  lo -= pad;
  hi += pad;
  if (non_negative) lo = std::max(lo, 0.0);
  auto X = [&](size_t i) {
    return s.size() == 1 ? (left + W - right) / 2 : left + (W - left - right) * static_cast<double>(i) / (s.size() - 1);
  };
  auto Y = [&](double v) { return top + (H - top - bottom) * (hi - v) / (hi - lo); };
  out << "<figure" << figure_attributes << "><svg class=\"trend-plot\" role=\"img\" aria-label=\"" << html_escape(title) << "\" width=\"" << W
      << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H << "\">";
  out << "<line class=\"axis\" x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom
      << "\"/><line class=\"axis\" x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
      << H - bottom << "\"/>";
  out << "<text x=\"2\" y=\"" << top + 8 << "\">" << fmt(hi) << "</text><text x=\"2\" y=\"" << H - bottom << "\">"
      << fmt(lo) << "</text><text x=\"2\" y=\"" << (H - bottom + top) / 2 << "\">" << html_escape(unit) << "</text>";
  out << "<text x=\"" << left << "\" y=\"" << H - 6 << "\">" << html_escape(run_tick(*s.front().run))
      << "</text><text x=\"" << W - right << "\" y=\"" << H - 6 << "\" text-anchor=\"end\">"
      << html_escape(run_tick(*s.back().run)) << "</text>";
  out << "<path class=\"band\" d=\"";
  for (size_t i = 0; i < s.size(); ++i) out << (i ? "L" : "M") << X(i) << "," << Y(s[i].hi);
  for (size_t i = s.size(); i-- > 0;) out << "L" << X(i) << "," << Y(s[i].lo);
  out << "Z\"/><path class=\"trend\" d=\"";
  for (size_t i = 0; i < s.size(); ++i) out << (i ? "L" : "M") << X(i) << "," << Y(s[i].value->center);
  out << "\"/>";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto& x = s[i];
    const char* cls = x.regression ? "regression" : (x.verdict == "faster" || x.verdict == "smaller") ? "improvement" : "run";
    out << "<a href=\"runs/" << x.run->id << ".json\"><circle class=\"" << cls << "\" cx=\"" << X(i) << "\" cy=\""
        << Y(x.value->center) << "\" r=\"" << (x.regression ? 4.5 : 3) << "\"><title>run " << x.run->id << ", "
        << html_escape(x.run->git_commit) << ", " << x.run->started << ": " << fmt(x.value->center) << " "
        << html_escape(unit) << " (band " << fmt(x.lo) << "–" << fmt(x.hi) << ", n=" << x.value->n << ")"
        << (x.verdict.empty() ? "" : "; " + x.verdict) << "</title></circle></a>";
  }
  out << "</svg><figcaption>" << html_escape(title) << "</figcaption></figure>\n";
}

void write_run_json(const HistoryStore& store, const RunInfo& run, const std::vector<HistoryRecord>& records,
                    const fs::path& file) {
  nlohmann::json j = {{"id", run.id},           {"experiment", run.experiment}, {"run_dir", run.run_dir},
                      {"started", run.started}, {"finished", run.finished},     {"status", run.status},
                      {"git_commit", run.git_commit}, {"device_name", run.device_name}, {"driver", run.driver},
                      {"cuda", run.cuda},       {"libtorch", run.libtorch},     {"host", run.host}};
  j["records"] = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json rj = {{"part", r.part}, {"point", r.point}, {"params", r.params}, {"labels", r.labels},
                         {"status", r.status}, {"time", r.time}};
    if (!r.message.empty()) rj["message"] = r.message;
    for (const auto& [name, m] : r.metrics) {
      rj["metrics"][name] = {{"unit", m.unit}, {"median", m.center}, {"mean", m.mean}, {"std", m.std},
                             {"min", m.min},   {"max", m.max},       {"n", m.n}};
      if (!m.samples.empty()) rj["metrics"][name]["samples"] = m.samples;
    }
    j["records"].push_back(std::move(rj));
  }
  (void)store;
  std::ofstream(file) << j.dump(1) << "\n";
}

}  // namespace

int write_trends_site(const HistoryStore& store, const RunFilter& filter, const fs::path& dir) {
  fs::create_directories(dir / "runs");
  std::ostringstream index;
  index << "<!doctype html><html><head><meta charset=\"utf-8\"><title>runner trends</title><style>" << kStyle
        << "</style></head><body><h1>runner trends</h1><p>Generated " << utc_now()
        << " from " << html_escape(store.file().string()) << ".</p><table><tr><th>experiment</th><th>runs</th>"
        << "<th>latest run</th><th>latest commit</th><th>regressions (latest run)</th></tr>\n";
  int pages = 0;
  CompareOptions options;
  for (const std::string& experiment : store.experiments()) {
    if (!filter.experiment.empty() && experiment != filter.experiment) continue;
    RunFilter f = filter;
    f.experiment = experiment;
    f.finished_only = true;
    // Smoke runs measure a toy configuration: beside real runs they would read as
    // huge regressions and improvements. Left out unless the filter asks for them.
    if (!f.smoke) f.smoke = false;
    std::vector<RunInfo> runs = store.runs(f);  // newest first
    RunFilter smoke = f;
    smoke.smoke = !*f.smoke;
    const size_t other_kind = store.runs(smoke).size();
    if (runs.empty()) {
      if (other_kind)
        index << "<tr><td>" << html_escape(experiment) << "</td><td>0 (" << other_kind << " smoke run"
              << (other_kind == 1 ? "" : "s") << " left out)</td><td></td><td></td><td></td></tr>\n";
      continue;
    }
    std::reverse(runs.begin(), runs.end());
    // series[part][point key][metric] -> samples in run order
    std::map<std::string, std::map<std::string, std::map<std::string, std::vector<Sample>>>> series;
    std::map<std::string, std::string> point_titles;
    std::map<std::string, nlohmann::json> point_params;  // point key -> parameters (for the order of the charts)
    std::set<std::string> not_plotted;
    std::vector<std::vector<HistoryRecord>> records(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      records[i] = store.records(runs[i].id);
      write_run_json(store, runs[i], records[i], dir / "runs" / (std::to_string(runs[i].id) + ".json"));
    }
    // Plot titles name only the parameters that differ between points of a part.
    std::map<std::string, std::map<std::string, std::set<std::string>>> values;
    for (const auto& run_records : records)
      for (const auto& r : run_records)
        for (const auto& [k, v] : r.params.items()) values[r.part][k].insert(v.dump());
    int latest_regressions = 0;
    for (size_t i = 0; i < runs.size(); ++i)
      for (const auto& r : records[i]) {
        if (r.status != "ok") continue;
        std::string title;
        for (const auto& [k, v] : r.params.items())
          if (filterable(k) && values[r.part][k].size() > 1) title += k + "=" + param_text(v) + " ";
        for (const auto& [k, v] : r.labels.items()) title += k + "=" + v.get<std::string>() + " ";
        point_titles[r.key] = title;
        point_params.emplace(r.key, r.params);
        const std::string primary = primary_metric(r);
        for (const auto& [name, m] : r.metrics) {
          // One chart per point for its primary metric (and memory); phases
          // and rates derived from the step time stay in runs/<id>.json.
          const bool constant_candidate = m.std == 0 && m.samples.empty();
          if (name != primary && m.unit != "bytes" && !constant_candidate) {
            not_plotted.insert(name);
            continue;
          }
          auto& s = series[r.part][r.key][name];
          Sample x{&runs[i], &m, m.center, m.center, "", false};
          if (m.samples.size() >= 2) {
            x.lo = quantile(m.samples, 0.25);
            x.hi = quantile(m.samples, 0.75);
          } else if (m.n >= 2) {  // mean +- std, within what was observed
            x.lo = std::max(m.min, m.mean - m.std);
            x.hi = std::min(m.max, m.mean + m.std);
          }
          s.push_back(x);
        }
      }
    // Steps over each whole series, not run against run.
    for (auto& [part, points] : series)
      for (auto& [key, metrics] : points)
        for (auto& [metric, samples] : metrics) {
          std::vector<double> centers;
          for (const auto& x : samples) centers.push_back(x.value->center);
          const int better = better_direction(samples.back().value->unit);
          for (const ChangePoint& c : change_points(centers, options.threshold, options.alpha)) {
            Sample& x = samples[c.at];
            const bool up = c.ratio > 1;
            x.regression = better != 0 && (better < 0) == up;
            x.verdict = std::string(x.regression ? "step: worse" : "step: better") + " x" + fmt(c.ratio) + " (p " +
                        fmt(c.p_value) + ")";
            if (x.regression && x.run == &runs.back()) ++latest_regressions;
          }
        }
    const std::string page = page_name(experiment);
    std::ofstream out(dir / page);
    out << "<!doctype html><html><head><meta charset=\"utf-8\"><title>" << html_escape(experiment)
        << " trends</title><style>" << kStyle << "</style><script>" << kCheckScript << "</script></head><body>"
        << "<p><a href=\"index.html\">all experiments</a></p><h1>" << html_escape(experiment) << "</h1><p>"
        << runs.size() << " runs from " << runs.front().started << " to " << runs.back().started
        << " on " << html_escape(runs.back().device_name)
        << ". x: runs in commit order (date and commit); line: median per run; band: interquartile range of the "
        << "repetitions (mean ± std, within min–max, without repetitions); one chart per point for its step time "
        << "(and memory); <span class=\"bad\">red</span>: a step to slower or larger detected over the whole series "
        << "(binary segmentation, pooled t over the runs, alpha " << options.alpha << ", threshold "
        << options.threshold * 100 << "%); green: a step to faster or smaller. Click a marker for that run's records.</p>\n";
    // Filters: the parts, and each parameter with more than one value over the
    // charted points (values as numbers where they are: 128 before 1024).
    std::map<std::string, std::vector<nlohmann::json>> choices;
    for (const auto& [part, points] : series)
      for (const auto& [key, metrics] : points)
        for (const auto& [k, v] : point_params[key].items())
          if (filterable(k) && std::find(choices[k].begin(), choices[k].end(), v) == choices[k].end())
            choices[k].push_back(v);
    out << "<form id=\"filters\"><label>part <select name=\"part\"><option value=\"\">all</option>";
    for (const auto& [part, points] : series)
      out << "<option value=\"" << html_escape(part) << "\">" << html_escape(part) << "</option>";
    out << "</select></label>";
    for (auto& [k, list] : choices) {
      if (list.size() < 2) continue;
      std::stable_sort(list.begin(), list.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        return a.is_number() && b.is_number() ? a.get<double>() < b.get<double>() : a.dump() < b.dump();
      });
      out << " <label>" << html_escape(k) << " <select name=\"" << html_escape(k) << "\"><option value=\"\">any</option>";
      for (const auto& v : list)
        out << "<option value=\"" << html_escape(param_text(v)) << "\">" << html_escape(param_text(v)) << "</option>";
      out << "</select></label>";
    }
    out << " <span id=\"shown\"></span></form>\n";
    for (const auto& [part, points] : series) {
      out << "<section class=\"part\" data-part=\"" << html_escape(part) << "\"><h2>" << html_escape(part)
          << "</h2><div class=\"plots\">\n";
      std::map<std::string, std::string> constants;  // metric -> its one value
      std::vector<std::string> keys;
      for (const auto& [key, metrics] : points) keys.push_back(key);
      std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
        return numeric_less(point_params[a], point_params[b]);
      });
      for (const std::string& key : keys)
        for (const auto& [metric, samples] : points.at(key)) {
          if (is_constant(samples)) {
            // A work count (flop, bytes moved) is not a trend: named once below the plots.
            constants.emplace(metric, fmt(samples.front().value->center) + " " + samples.front().value->unit);
            continue;
          }
          nlohmann::json params = nlohmann::json::object();
          for (const auto& [k, v] : point_params[key].items())
            if (filterable(k)) params[k] = param_text(v);
          write_plot(out, (point_titles[key].empty() ? part + " " : point_titles[key]) + "· " + metric,
                     samples.back().value->unit, samples,
                     " data-part=\"" + html_escape(part) + "\" data-params=\"" + html_escape(params.dump()) + "\"");
        }
      out << "</div>\n";
      if (!constants.empty()) {
        out << "<p class=\"constants\">Constant in every run (not plotted): ";
        bool first = true;
        for (const auto& [metric, value] : constants) {
          out << (first ? "" : ", ") << html_escape(metric) << (points.size() == 1 ? " = " + html_escape(value) : "");
          first = false;
        }
        out << ".</p>\n";
      }
      out << "</section>\n";
    }
    if (!not_plotted.empty()) {
      std::string names;
      for (const auto& n : not_plotted) names += (names.empty() ? "" : ", ") + n;
      out << "<p class=\"not-plotted\">Not charted (phases, rates derived from the step time; in each run's records): "
          << html_escape(names) << ".</p>\n";
    }
    out << "<h2>runs</h2><table><tr><th>run</th><th>started</th><th>commit</th><th>status</th><th>run dir</th></tr>\n";
    for (const auto& r : runs)
      out << "<tr><td><a href=\"runs/" << r.id << ".json\">" << r.id << "</a></td><td>" << r.started << "</td><td>"
          << html_escape(r.git_commit) << "</td><td>" << r.status << (r.verdict == "regression" ? ", regression" : "")
          << "</td><td>" << html_escape(r.run_dir) << "</td></tr>\n";
    out << "</table><script>" << kFilterScript << "</script></body></html>\n";
    index << "<tr><td><a href=\"" << page << "\">" << html_escape(experiment) << "</a></td><td>" << runs.size()
          << (other_kind && !*f.smoke ? " (" + std::to_string(other_kind) + " smoke left out)" : "") << "</td><td>" << runs.back().started << "</td><td>" << html_escape(runs.back().git_commit) << "</td><td"
          << (latest_regressions ? " class=\"bad\"" : "") << ">" << latest_regressions << "</td></tr>\n";
    ++pages;
  }
  index << "</table></body></html>\n";
  std::ofstream(dir / "index.html") << index.str();
  return pages;
}

}  // namespace runner::history
