// Renderers of a Comparison: an aligned terminal table, Markdown for a pull
// request comment, and JSON for tools. All three list points found on one side
// only and the warnings.
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

#include "history/compare.hpp"

namespace runner::history {
namespace {

std::string number(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) std::snprintf(buf, sizeof buf, "%.3e", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string with_unit(double v, const std::string& unit) { return number(v) + (unit.empty() ? "" : " " + unit); }

std::string p_text(const CompareRow& r) {
  if (r.p_value < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, r.p_value < 1e-4 ? "%.1e" : "%.4f", r.p_value);
  return buf;
}

std::string ratio_text(const CompareRow& r) {
  if (r.metric == "status") return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", r.ratio);
  return buf;
}

std::map<std::string, int> counts(const Comparison& c) {
  std::map<std::string, int> n;
  for (const auto& r : c.rows) ++n[r.verdict];
  return n;
}

std::string summary(const Comparison& c) {
  std::string s;
  for (const auto& [verdict, n] : counts(c)) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + verdict;
  if (s.empty()) s = "no common points (if a parameter differs on purpose, --ignore-param NAME)";
  if (!c.only_in_a.empty()) s += "; " + std::to_string(c.only_in_a.size()) + " only in A";
  if (!c.only_in_b.empty()) s += "; " + std::to_string(c.only_in_b.size()) + " only in B";
  return s;
}

bool shown(const CompareRow& r, const CompareOptions& o) { return !o.only_changed || r.verdict != "same"; }

std::string a_text(const CompareRow& r) { return r.metric == "status" ? "-" : with_unit(r.a, r.unit); }
std::string b_text(const CompareRow& r) { return r.metric == "status" ? r.unit : with_unit(r.b, r.unit); }


}  // namespace

void render_table(const Comparison& c, std::ostream& out, bool color) {
  out << "A: " << c.a.description << "\nB: " << c.b.description << "\n";
  for (const auto& w : c.warnings) out << "warning: " << w << "\n";
  const std::vector<std::string> head = {"point", "metric", "A", "B", "B/A", "p", "verdict"};
  std::vector<std::vector<std::string>> cells;
  std::vector<const CompareRow*> rows;
  for (const auto& r : c.rows) {
    if (!shown(r, c.options)) continue;
    cells.push_back({r.point, r.metric, a_text(r), b_text(r), ratio_text(r), p_text(r), r.verdict});
    rows.push_back(&r);
  }
  std::vector<size_t> width(head.size());
  for (size_t i = 0; i < head.size(); ++i) width[i] = head[i].size();
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto line = [&](const std::vector<std::string>& row, const CompareRow* r) {
    for (size_t i = 0; i < row.size(); ++i) {
      const bool right = i >= 2 && i <= 5;
      const std::string pad(width[i] - row[i].size(), ' ');
      std::string cell = right ? pad + row[i] : row[i] + (i + 1 < row.size() ? pad : "");
      if (color && r && i == 6) {
        const char* code = r->regression ? "\033[1;31m"
                           : (r->verdict == "faster" || r->verdict == "smaller" || r->verdict == "fixed") ? "\033[32m"
                           : r->verdict == "noisy" ? "\033[33m" : "";
        if (*code) cell = code + cell + "\033[0m";
      }
      out << cell << (i + 1 < row.size() ? "  " : "");
    }
    out << "\n";
  };
  line(head, nullptr);
  for (size_t i = 0; i < cells.size(); ++i) line(cells[i], rows[i]);
  for (const auto& p : c.only_in_a) out << "only in A: " << p << "\n";
  for (const auto& p : c.only_in_b) out << "only in B: " << p << "\n";
  out << (c.regression() ? "REGRESSION: " : "no regression: ") << summary(c) << " (threshold "
      << c.options.threshold * 100 << "%, alpha " << c.options.alpha << ")\n";
}

void render_markdown(const Comparison& c, std::ostream& out) {
  out << "### runner compare: " << (c.regression() ? "**regression**" : "no regression") << "\n\n"
      << "- A: " << c.a.description << "\n- B: " << c.b.description << "\n- " << summary(c) << "; noise threshold "
      << c.options.threshold * 100 << "%, significance level " << c.options.alpha
      << " (two-sided Mann-Whitney U over the repetitions)\n";
  for (const auto& w : c.warnings) out << "- **warning:** " << w << "\n";
  out << "\n| point | metric | A | B | B/A | p | verdict |\n|---|---|---:|---:|---:|---:|---|\n";
  auto escape = [](std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
  };
  for (const auto& r : c.rows) {
    if (!shown(r, c.options)) continue;
    const std::string verdict = r.regression ? "**" + r.verdict + "**" : r.verdict;
    out << "| " << escape(r.point) << " | " << r.metric << " | " << a_text(r) << " | " << b_text(r) << " | "
        << ratio_text(r) << " | " << p_text(r) << " | " << verdict << " |\n";
  }
  if (!c.only_in_a.empty() || !c.only_in_b.empty()) out << "\n";
  for (const auto& p : c.only_in_a) out << "- only in A: " << escape(p) << "\n";
  for (const auto& p : c.only_in_b) out << "- only in B: " << escape(p) << "\n";
}

nlohmann::json comparison_json(const Comparison& c) {
  auto side = [](const Side& s) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : s.runs)
      runs.push_back({{"id", r.id}, {"experiment", r.experiment}, {"run_dir", r.run_dir}, {"started", r.started},
                      {"git_commit", r.git_commit}, {"device", r.device}, {"device_name", r.device_name},
                      {"driver", r.driver}, {"cuda", r.cuda}, {"libtorch", r.libtorch}, {"host", r.host}});
    return nlohmann::json{{"spec", s.spec}, {"description", s.description}, {"runs", runs}};
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows) {
    if (!shown(r, c.options)) continue;
    nlohmann::json j = {{"experiment", r.experiment}, {"point", r.point},   {"metric", r.metric},
                        {"unit", r.unit},             {"test", r.test},     {"verdict", r.verdict},
                        {"regression", r.regression}, {"n_a", r.n_a},       {"n_b", r.n_b}};
    if (r.metric != "status") {
      j["a"] = r.a;
      j["b"] = r.b;
      j["ratio"] = std::isfinite(r.ratio) ? nlohmann::json(r.ratio) : nlohmann::json(nullptr);
    }
    j["p_value"] = r.p_value >= 0 ? nlohmann::json(r.p_value) : nlohmann::json(nullptr);
    rows.push_back(std::move(j));
  }
  nlohmann::json verdicts = nlohmann::json::object();
  for (const auto& [v, n] : counts(c)) verdicts[v] = n;
  return {{"a", side(c.a)},
          {"b", side(c.b)},
          {"threshold", c.options.threshold},
          {"alpha", c.options.alpha},
          {"regression", c.regression()},
          {"verdicts", verdicts},
          {"rows", rows},
          {"only_in_a", c.only_in_a},
          {"only_in_b", c.only_in_b},
          {"warnings", c.warnings}};
}

}  // namespace runner::history
