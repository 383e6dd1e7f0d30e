// Renderers of a Comparison: an aligned terminal table, Markdown for a pull
// request comment, and JSON for tools. All three list points found on one side
// only and the warnings.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

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

// A p-value from summary statistics alone (Welch's t) carries a "t" so it is not
// read as the rank test's; the legend under the table says what it is.
bool from_summaries(const CompareRow& r) { return r.test == "t (no samples)"; }

std::string p_text(const CompareRow& r) {
  if (r.p_value < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, r.p_value < 1e-4 ? "%.1e" : "%.4f", r.p_value);
  return from_summaries(r) ? std::string(buf) + " (t)" : std::string(buf);
}

const char* kSummaryTestNote =
    "p (t): Welch's t-test from mean, std and n, for records that kept no samples (it assumes independent, "
    "normal steps); other p: block bootstrap of the median ratio over steps, or Welch's t over repetition means (or interleaved rounds)";

const char* kGatingNote =
    "gating: each point's primary metric (its step time) and memory; Benjamini-Hochberg over the points, "
    "so alpha bounds the share of false alarms among flagged points; other rows inform";

std::string ratio_text(const CompareRow& r) {
  if (r.metric == "status") return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", r.ratio);
  return buf;
}

std::map<std::string, int> counts(const Comparison& c) {
  std::map<std::string, int> n;
  for (const auto& r : c.rows)
    if (r.hidden.empty()) ++n[r.verdict];
  return n;
}

// "not shown: 4 constant (flop, bytes_moved), 2 without a better direction (loss_last)"
std::string hidden_note(const Comparison& c) {
  std::map<std::string, std::pair<int, std::set<std::string>>> by_reason;
  for (const auto& r : c.rows)
    if (!r.hidden.empty() && !shown(r, c.options)) {
      auto& [n, names] = by_reason[r.hidden];
      ++n;
      names.insert(r.metric);
    }
  std::string s;
  for (const auto& [reason, entry] : by_reason) {
    std::string names;
    for (const auto& m : entry.second) names += (names.empty() ? "" : ", ") + m;
    s += (s.empty() ? "" : ", ") + std::to_string(entry.first) + " " +
         (reason == "constant" ? "constant" : reason == "derived" ? "derived from the step time" : "without a better direction") +
         " (" + names + ")";
  }
  return s.empty() ? s : "not shown: " + s + "; --metric NAME shows one";
}

bool any_from_summaries(const Comparison& c) {
  for (const auto& r : c.rows)
    if (shown(r, c.options) && from_summaries(r)) return true;
  return false;
}

std::string summary(const Comparison& c) {
  std::string s;
  for (const auto& [verdict, n] : counts(c)) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + verdict;
  if (s.empty()) s = "no common points (if a parameter differs on purpose, --ignore-param NAME)";
  if (!c.only_in_a.empty()) s += "; " + std::to_string(c.only_in_a.size()) + " only in A";
  if (!c.only_in_b.empty()) s += "; " + std::to_string(c.only_in_b.size()) + " only in B";
  return s;
}


std::string a_text(const CompareRow& r) { return r.metric == "status" ? "-" : with_unit(r.a, r.unit); }
std::string b_text(const CompareRow& r) { return r.metric == "status" ? r.unit : with_unit(r.b, r.unit); }


}  // namespace

void render_table(const Comparison& c, std::ostream& out, bool color) {
  out << "A: " << c.a.description << "\nB: " << c.b.description << "\n";
  for (const auto& w : c.warnings) out << "warning: " << w << "\n";
  for (const auto& b : c.build_changes) out << "code changed: " << b << "\n";
  const std::vector<std::string> head = {"point", "metric", "A", "B", "B/A", "p", "verdict", "note"};
  std::vector<std::vector<std::string>> cells;
  std::vector<const CompareRow*> rows;
  for (const auto& r : c.rows) {
    if (!shown(r, c.options)) continue;
    cells.push_back({r.point, r.metric, a_text(r), b_text(r), ratio_text(r), p_text(r), r.verdict, r.note});
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
  if (any_from_summaries(c)) out << kSummaryTestNote << "\n";
  out << kGatingNote << "\n";
  if (const std::string note = hidden_note(c); !note.empty()) out << note << "\n";
  out << (c.regression() ? "REGRESSION: " : "no regression: ") << summary(c) << " (threshold "
      << c.options.threshold * 100 << "%, alpha " << c.options.alpha << ")\n";
}

void render_markdown(const Comparison& c, std::ostream& out) {
  out << "### runner compare: " << (c.regression() ? "**regression**" : "no regression") << "\n\n"
      << "- A: " << c.a.description << "\n- B: " << c.b.description << "\n- " << summary(c) << "; noise threshold "
      << c.options.threshold * 100 << "%, significance level " << c.options.alpha << "\n- " << kGatingNote << "\n";
  for (const auto& b : c.build_changes) out << "- code changed: " << b << "\n";
  if (any_from_summaries(c)) out << "- " << kSummaryTestNote << "\n";
  if (const std::string note = hidden_note(c); !note.empty()) out << "- " << note << "\n";
  for (const auto& w : c.warnings) out << "- **warning:** " << w << "\n";
  out << "\n| point | metric | A | B | B/A | p | verdict | note |\n|---|---|---:|---:|---:|---:|---|---|\n";
  auto escape = [](std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
  };
  for (const auto& r : c.rows) {
    if (!shown(r, c.options)) continue;
    const std::string verdict = r.regression ? "**" + r.verdict + "**" : r.verdict;
    out << "| " << escape(r.point) << " | " << r.metric << " | " << a_text(r) << " | " << b_text(r) << " | "
        << ratio_text(r) << " | " << p_text(r) << " | " << verdict << " | " << escape(r.note) << " |\n";
  }
  if (!c.only_in_a.empty() || !c.only_in_b.empty()) out << "\n";
  for (const auto& p : c.only_in_a) out << "- only in A: " << escape(p) << "\n";
  for (const auto& p : c.only_in_b) out << "- only in B: " << escape(p) << "\n";
}

namespace {

// A streamed JSON writer: a compare of two 10,000-point runs has 20,000 rows, and
// building them as a nlohmann tree first costs more than the whole comparison.
void put_string(std::ostream& out, const std::string& s) {
  out << '"';
  size_t plain = 0;  // start of the run of characters that need no escape
  auto flush = [&](size_t i) { out.write(s.data() + plain, static_cast<std::streamsize>(i - plain)); };
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    flush(i);
    plain = i + 1;
    switch (ch) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      case '\r': out << "\\r"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", ch);
        out << buf;
      }
    }
  }
  flush(s.size());
  out << '"';
}

// Shortest text that reads back as the same double; null when not finite.
void put_number(std::ostream& out, double v) {
  if (!std::isfinite(v)) {
    out << "null";
    return;
  }
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.write(buf, end - buf);
}

void put_strings(std::ostream& out, const std::vector<std::string>& list) {
  out << '[';
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out << ", ";
    put_string(out, list[i]);
  }
  out << ']';
}

void put_side(std::ostream& out, const Side& s) {
  out << "{\"spec\": ";
  put_string(out, s.spec);
  out << ", \"description\": ";
  put_string(out, s.description);
  out << ", \"runs\": [";
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const RunInfo& r = s.runs[i];
    out << (i ? ", " : "") << "{\"id\": " << r.id;
    const std::pair<const char*, const std::string*> fields[] = {
        {"experiment", &r.experiment}, {"run_dir", &r.run_dir}, {"started", &r.started},
        {"git_commit", &r.git_commit}, {"device", &r.device},   {"device_name", &r.device_name},
        {"driver", &r.driver},         {"cuda", &r.cuda},       {"libtorch", &r.libtorch},
        {"host", &r.host}};
    for (const auto& [key, value] : fields) {
      out << ", \"" << key << "\": ";
      put_string(out, *value);
    }
    out << '}';
  }
  out << "]}";
}

}  // namespace

void write_json(const Comparison& c, std::ostream& out) {
  out << "{\n  \"a\": ";
  put_side(out, c.a);
  out << ",\n  \"b\": ";
  put_side(out, c.b);
  out << ",\n  \"threshold\": ";
  put_number(out, c.options.threshold);
  out << ",\n  \"alpha\": ";
  put_number(out, c.options.alpha);
  out << ",\n  \"regression\": " << (c.regression() ? "true" : "false") << ",\n  \"verdicts\": {";
  bool first = true;
  for (const auto& [v, n] : counts(c)) {
    out << (first ? "" : ", ");
    first = false;
    put_string(out, v);
    out << ": " << n;
  }
  out << "},\n  \"rows\": [";
  first = true;
  for (const auto& r : c.rows) {
    if (c.options.only_changed && r.verdict == "same") continue;  // hidden rows stay: tools decide
    out << (first ? "\n    " : ",\n    ");
    first = false;
    out << "{\"experiment\": ";
    put_string(out, r.experiment);
    out << ", \"point\": ";
    put_string(out, r.point);
    out << ", \"metric\": ";
    put_string(out, r.metric);
    out << ", \"unit\": ";
    put_string(out, r.unit);
    if (r.metric != "status") {
      out << ", \"a\": ";
      put_number(out, r.a);
      out << ", \"b\": ";
      put_number(out, r.b);
      out << ", \"ratio\": ";
      put_number(out, r.ratio);
    }
    out << ", \"p_value\": ";
    if (r.p_value >= 0) put_number(out, r.p_value);
    else out << "null";
    out << ", \"q_value\": ";
    if (r.q_value >= 0) put_number(out, r.q_value);
    else out << "null";
    out << ", \"test\": ";
    put_string(out, r.test);
    out << ", \"gating\": " << (r.gating ? "true" : "false") << ", \"separated\": " << (r.separated ? "true" : "false");
    out << ", \"identity\": ";
    put_string(out, r.identity);
    if (!r.note.empty()) {
      out << ", \"note\": ";
      put_string(out, r.note);
    }
    out << ", \"n_a\": " << r.n_a << ", \"n_b\": " << r.n_b << ", \"verdict\": ";
    put_string(out, r.verdict);
    out << ", \"regression\": " << (r.regression ? "true" : "false");
    if (!r.hidden.empty()) {
      out << ", \"hidden\": ";
      put_string(out, r.hidden);
    }
    out << '}';
  }
  out << (first ? "" : "\n  ") << "],\n  \"only_in_a\": ";
  put_strings(out, c.only_in_a);
  out << ",\n  \"only_in_b\": ";
  put_strings(out, c.only_in_b);
  out << ",\n  \"warnings\": ";
  put_strings(out, c.warnings);
  out << ",\n  \"build_changes\": ";
  put_strings(out, c.build_changes);
  out << "\n}\n";
}

nlohmann::json comparison_json(const Comparison& c) {
  std::ostringstream out;
  write_json(c, out);
  return nlohmann::json::parse(out.str());
}

}  // namespace runner::history
