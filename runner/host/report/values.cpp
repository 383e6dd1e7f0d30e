// Values: numbers a report's prose quotes, computed from its rendered tables (a cell, a
// ratio, a sum, a least-squares line) by a small arithmetic expression, so prose never
// carries a number typed by hand. Rendered into the .md between value markers and into
// <id>.values.tex for the writeup.
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "report/report.hpp"

namespace runner::report {
namespace {

// Recursive descent over: sum := product (('+'|'-') product)*; product := power (('*'|'/')
// power)*; power := unary ('^' unary)?; unary := '-' unary | atom; atom := number | name |
// name '(' args ')' | '(' sum ')'. Strings ("...") are arguments of functions only.
class Expression {
 public:
  // `pivot_tables`: tables whose columns come from their records' pivot values.
  Expression(const std::string& text, const std::vector<BuiltTable>& tables, const std::map<std::string, double>& known,
             const std::set<std::string>& pivot_tables)
      : text_(text), tables_(tables), known_(known), pivot_tables_(pivot_tables) {}

  double evaluate() {
    const double v = sum();
    skip();
    if (at_ < text_.size()) fail("unexpected '" + text_.substr(at_, 1) + "'");
    return v;
  }

 private:
  const std::string& text_;
  const std::vector<BuiltTable>& tables_;
  const std::map<std::string, double>& known_;
  const std::set<std::string>& pivot_tables_;
  std::size_t at_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw SpecError("expr '" + text_ + "': " + what + " (at character " + std::to_string(at_ + 1) + ")");
  }
  void skip() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool take(char c) {
    skip();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  double sum() {
    double v = product();
    while (true) {
      if (take('+')) v += product();
      else if (take('-')) v -= product();
      else return v;
    }
  }
  double product() {
    double v = power();
    while (true) {
      if (take('*')) v *= power();
      else if (take('/')) v /= power();
      else return v;
    }
  }
  double power() {
    const double base = unary();
    return take('^') ? std::pow(base, unary()) : base;
  }
  double unary() { return take('-') ? -unary() : atom(); }

  std::string string_arg() {
    skip();
    if (!take('"')) fail("expected a quoted name");
    const std::size_t end = text_.find('"', at_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }

  const BuiltTable& table(const std::string& name) const {
    for (const auto& t : tables_)
      if (t.name == name) return t;
    fail("no table '" + name + "' in this report");
  }
  std::size_t column(const BuiltTable& t, const std::string& header) const {
    for (std::size_t i = 0; i < t.csv_header.size(); ++i)
      if (t.csv_header[i] == header) return i;
    // A pivot table has a column per pivot value its records hold: a run without that value
    // (a smoke run, a part not run yet) leaves the cell missing, not misnamed. A table
    // without rows has no columns at all.
    if (t.csv_rows.empty() || pivot_tables_.count(t.name)) return std::numeric_limits<std::size_t>::max();
    fail("table '" + t.name + "' has no column '" + header + "'");
  }
  // A cell that holds no number ("–" not measured, OOM) is NaN: the value renders as "–",
  // as a table's cell would, so a smoke or partial run still renders.
  static double number_in(const std::vector<std::string>* row, std::size_t col) {
    if (row == nullptr || col >= row->size()) return std::nan("");
    const std::string& cell = (*row)[col];
    try {
      std::size_t used = 0;
      const double v = std::stod(cell, &used);
      if (used == cell.size()) return v;
    } catch (const std::exception&) {
    }
    return std::nan("");
  }
  // The row whose key cells, joined by ", ", read `key`; null when this run has none.
  static const std::vector<std::string>* row(const BuiltTable& t, const std::string& key) {
    for (const auto& r : t.csv_rows) {
      std::string joined;
      for (std::size_t i = 0; i < t.row_key_columns && i < r.size(); ++i) joined += (i ? ", " : "") + r[i];
      if (joined == key) return &r;
    }
    return nullptr;
  }

  static std::vector<double> column_values(const BuiltTable& t, std::size_t col) {
    std::vector<double> out;
    for (const auto& r : t.csv_rows) out.push_back(number_in(&r, col));
    return out;
  }

  double call(const std::string& name) {
    if (name == "cell") {
      const BuiltTable& t = table(string_arg());
      if (!take(',')) fail("cell(\"table\", \"row\", \"column\")");
      const std::string key = string_arg();
      if (!take(',')) fail("cell(\"table\", \"row\", \"column\")");
      const std::size_t col = column(t, string_arg());
      return number_in(row(t, key), col);
    }
    if (name == "sum" || name == "slope" || name == "intercept") {
      const BuiltTable& t = table(string_arg());
      if (!take(',')) fail(name + "(\"table\", \"column\"...)");
      const std::vector<double> a = column_values(t, column(t, string_arg()));
      if (name == "sum") {
        double s = 0;
        for (double v : a) s += v;
        return s;
      }
      // Least squares y = intercept + slope x through the table's rows.
      if (!take(',')) fail(name + "(\"table\", \"x column\", \"y column\")");
      const std::vector<double> b = column_values(t, column(t, string_arg()));
      if (a.size() < 2) return std::nan("");
      double mx = 0, my = 0;
      for (std::size_t i = 0; i < a.size(); ++i) mx += a[i] / a.size(), my += b[i] / a.size();
      double sxy = 0, sxx = 0;
      for (std::size_t i = 0; i < a.size(); ++i) sxy += (a[i] - mx) * (b[i] - my), sxx += (a[i] - mx) * (a[i] - mx);
      if (sxx == 0) return std::nan("");
      const double slope = sxy / sxx;
      return name == "slope" ? slope : my - slope * mx;
    }
    std::vector<double> args = {sum()};
    while (take(',')) args.push_back(sum());
    const auto need = [&](std::size_t n) {
      if (args.size() != n) fail(name + ": expected " + std::to_string(n) + " argument(s)");
    };
    if (name == "sqrt") return need(1), std::sqrt(args[0]);
    if (name == "abs") return need(1), std::fabs(args[0]);
    if (name == "ceil") return need(1), std::ceil(args[0]);
    if (name == "floor") return need(1), std::floor(args[0]);
    if (name == "min") return need(2), std::min(args[0], args[1]);
    if (name == "max") return need(2), std::max(args[0], args[1]);
    fail("unknown function '" + name + "' (cell, sum, slope, intercept, sqrt, abs, ceil, floor, min, max)");
  }

  double atom() {
    skip();
    if (take('(')) {
      const double v = sum();
      if (!take(')')) fail("expected ')'");
      return v;
    }
    if (at_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.')) {
      std::size_t used = 0;
      const double v = std::stod(text_.substr(at_), &used);
      at_ += used;
      return v;
    }
    const std::size_t start = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) ++at_;
    if (start == at_) fail("expected a number, a value name or a function");
    const std::string name = text_.substr(start, at_ - start);
    if (take('(')) {
      const double v = call(name);
      if (!take(')')) fail("expected ')' after the arguments of " + name);
      return v;
    }
    const auto it = known_.find(name);
    if (it == known_.end()) fail("'" + name + "' is no value declared above it");
    return it->second;
  }
};

const std::regex kTemplate(R"(\{\{value ([A-Za-z0-9_]+)\}\})");
const std::regex kMarked(R"(<!-- runner:value ([A-Za-z0-9_]+) -->([\s\S]*?)<!-- runner:value end -->)");

}  // namespace

std::vector<RenderedValue> compute_values(const ReportSpec& spec, const std::vector<BuiltTable>& tables) {
  std::map<std::string, double> known;
  std::set<std::string> pivot_tables;
  for (const auto& t : spec.tables)
    if (!t.pivot.empty()) pivot_tables.insert(t.name);
  std::vector<RenderedValue> out;
  for (const auto& v : spec.values) {
    double x = 0;
    try {
      x = Expression(v.expr, tables, known, pivot_tables).evaluate();
    } catch (const SpecError& e) {
      throw SpecError("report " + spec.id + ": value '" + v.name + "': " + e.what());
    }
    known[v.name] = x;
    out.push_back({v.name, x, std::isfinite(x) ? format_number(x, v.format) : "–"});
  }
  return out;
}

std::string merge_values(const std::string& markdown, const std::string& report_id,
                         const std::vector<RenderedValue>& values) {
  const auto text_of = [&](const std::string& name) -> const std::string& {
    for (const auto& v : values)
      if (v.name == name) return v.text;
    throw SpecError(report_id + ".md: value '" + name + "' is not declared in the report's values:");
  };
  std::string out;
  // Marked values first (re-render), then templates written since the last render.
  std::string rest = markdown;
  for (const std::regex* pattern : {&kMarked, &kTemplate}) {
    out.clear();
    std::size_t last = 0;
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), *pattern); it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      out += rest.substr(last, it->position() - last);
      out += "<!-- runner:value " + name + " -->" + text_of(name) + "<!-- runner:value end -->";
      last = it->position() + it->length();
    }
    out += rest.substr(last);
    rest = out;
  }
  return out;
}

std::string values_latex(const std::string& report_id, const std::vector<RenderedValue>& values) {
  std::string out =
      "% Generated by `runner report`: the values quoted in the prose, for \\val{<report>.<name>}.\n";
  for (const auto& v : values) out += "\\runnervalue{" + report_id + "." + v.name + "}{" + latex_escape(v.text) + "}\n";
  return out;
}

}  // namespace runner::report
