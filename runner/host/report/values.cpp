// Values: numbers a report's prose quotes, computed from its rendered tables (a cell, a
// ratio, a sum, a least-squares line) by a small arithmetic expression, so prose never
// carries a number typed by hand. Rendered into the .md between value markers and into
// <id>.values.tex for the writeup.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "report/report.hpp"
#include "text_distance.hpp"

namespace runner::report {
namespace {

// Recursive descent over: sum := product (('+'|'-') product)*; product := power (('*'|'/')
// power)*; power := unary ('^' unary)?; unary := '-' unary | atom; atom := number | name |
// name '(' args ')' | '(' sum ')'. Strings ("...") are arguments of functions only.
// What the tables hold: none of the records yet (the spec check before a run), every
// planned point's records, or only some (a smoke run, a partial run).
enum class Rows { none_yet, all_points, some_points };

class Expression {
 public:
  // `pivot_tables`: tables whose columns come from their records' pivot values.
  Expression(const std::string& text, const std::vector<BuiltTable>& tables, const std::map<std::string, double>& known,
             const std::set<std::string>& pivot_tables, Rows rows)
      : text_(text), tables_(tables), known_(known), pivot_tables_(pivot_tables), rows_(rows) {}

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
  const Rows rows_;
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
  // Every nesting level (a parenthesis, a call, a minus sign) recurses through here:
  // 10,000 parentheses overflowed the stack. No real expression nests this deep.
  static constexpr int kMaxDepth = 100;
  int depth_ = 0;
  double unary() {
    if (++depth_ > kMaxDepth)
      fail("nested more than " + std::to_string(kMaxDepth) + " levels deep (parentheses, calls or minus signs)");
    const double v = take('-') ? -unary() : atom();
    --depth_;
    return v;
  }

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
    std::vector<std::string> names;
    for (const auto& t : tables_) {
      if (t.name == name) return t;
      names.push_back(t.name);
    }
    fail("no table '" + name + "' in this report" + suggestion(name, names));
  }
  std::size_t column(const BuiltTable& t, const std::string& header) const {
    for (std::size_t i = 0; i < t.csv_header.size(); ++i)
      if (t.csv_header[i] == header) return i;
    // A pivot table has a column per pivot value its records hold: a run without that value
    // (a smoke run, a part not run yet) leaves the cell missing, not misnamed. A table
    // without rows has no columns at all (a columns: table's are known before a run).
    if (pivot_tables_.count(t.name) || (t.csv_rows.empty() && rows_ != Rows::none_yet))
      return std::numeric_limits<std::size_t>::max();
    fail("table '" + t.name + "' has no column '" + header + "'" +
         suggestion(header, std::vector<std::string>(t.csv_header.begin() + t.row_key_columns, t.csv_header.end())));
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

  // One condition of a column aggregate's filter on a row key: "precision=bf16",
  // "seq<=1024", "model.size!=small|medium" ('|' separates alternatives of = and !=).
  struct Condition {
    std::string text, key, op;
    std::size_t key_column = 0;
    std::vector<std::string> alternatives;  // = and !=
    double bound = 0;                       // < <= > >=
  };
  Condition condition(const BuiltTable& t, const std::string& text) const {
    const auto trim = [](std::string s) {
      const std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    Condition c;
    c.text = text;
    const std::size_t op = text.find_first_of("=!<>");
    if (op == std::string::npos)
      fail("filter \"" + text + "\" of table '" + t.name + "': expected key=value, key!=value, key<number, "
           "key<=number, key>number or key>=number");
    c.key = trim(text.substr(0, op));
    std::size_t value_at = op + 1;
    if (text[op] == '=') c.op = "=", value_at = text.compare(op, 2, "==") == 0 ? op + 2 : op + 1;
    else if (op + 1 < text.size() && text[op + 1] == '=') c.op = text.substr(op, 2), value_at = op + 2;
    else if (text[op] == '!') fail("filter \"" + text + "\": '!' without '='; write key!=value");
    else c.op = text.substr(op, 1);
    const std::string value = trim(text.substr(value_at));
    const std::vector<std::string> keys(t.csv_header.begin(), t.csv_header.begin() + t.row_key_columns);
    const auto key = std::find(keys.begin(), keys.end(), c.key);
    if (key == keys.end())
      fail("filter \"" + text + "\": table '" + t.name + "' has no row key '" + c.key + "'" +
           suggestion(c.key, keys));
    c.key_column = static_cast<std::size_t>(key - keys.begin());
    if (value.empty()) fail("filter \"" + text + "\": no value after '" + c.op + "'");
    if (c.op == "=" || c.op == "!=") {
      for (std::size_t from = 0;;) {
        const std::size_t bar = value.find('|', from);
        c.alternatives.push_back(trim(value.substr(from, bar - from)));
        if (bar == std::string::npos) break;
        from = bar + 1;
      }
    } else if (!is_number(value, c.bound)) {
      fail("filter \"" + text + "\": '" + value + "' is no number; " + c.op + " compares numbers");
    }
    return c;
  }
  static bool is_number(const std::string& text, double& out) {
    try {
      std::size_t used = 0;
      out = std::stod(text, &used);
      return used == text.size();
    } catch (const std::exception&) {
      return false;
    }
  }
  bool matches(const BuiltTable& t, const Condition& c, const std::vector<std::string>& row) const {
    const std::string& cell = c.key_column < row.size() ? row[c.key_column] : std::string();
    if (c.op == "=" || c.op == "!=")
      return (std::find(c.alternatives.begin(), c.alternatives.end(), cell) != c.alternatives.end()) == (c.op == "=");
    double v = 0;
    if (cell.empty()) return false;  // a failed point's record may lack the key
    if (!is_number(cell, v))
      fail("filter \"" + c.text + "\": row key " + c.key + " of table '" + t.name + "' is '" + cell +
           "', no number; compare it with = or !=");
    return c.op == "<" ? v < c.bound : c.op == "<=" ? v <= c.bound : c.op == ">" ? v > c.bound : v >= c.bound;
  }
  // The distinct values of row key `column` in `t`, for messages.
  static std::string key_values(const BuiltTable& t, std::size_t column) {
    std::vector<std::string> seen;
    for (const auto& r : t.csv_rows)
      if (column < r.size() && std::find(seen.begin(), seen.end(), r[column]) == seen.end()) seen.push_back(r[column]);
    std::string out;
    for (std::size_t i = 0; i < seen.size() && i < 12; ++i) out += (i ? ", " : "") + seen[i];
    return seen.size() > 12 ? out + ", ..." : out;
  }

  // column_min / column_max / column_mean("table", "column", "condition"...): over the rows
  // that every condition keeps (all rows without one). A kept row whose cell holds no number
  // ("–", OOM) makes the result "–", as one cell() would: never a 0, never skipped. No kept
  // row is a mistake where every point has its records, else "–".
  double aggregate(const std::string& name) {
    const std::string usage = name + "(\"table\", \"column\", \"key=value\"...)";
    const BuiltTable& t = table(string_arg());
    if (!take(',')) fail("expected " + usage);
    const std::size_t col = column(t, string_arg());
    std::vector<Condition> conditions;
    std::string filter;
    while (take(',')) {
      conditions.push_back(condition(t, string_arg()));
      filter += std::string(filter.empty() ? "" : ", ") + "\"" + conditions.back().text + "\"";
    }
    std::vector<double> kept;
    for (const auto& r : t.csv_rows) {
      bool keep = true;
      for (const Condition& c : conditions) keep = keep && matches(t, c, r);
      if (keep) kept.push_back(number_in(&r, col));
    }
    if (kept.empty()) {
      if (rows_ != Rows::all_points) return std::nan("");
      if (t.csv_rows.empty()) fail("table '" + t.name + "' has no rows");
      std::string keys;
      for (const Condition& c : conditions)
        keys += std::string(keys.empty() ? "" : "; ") + c.key + " is one of " + key_values(t, c.key_column);
      fail("no row of table '" + t.name + "' matches " + filter + " (" + keys + "); fix the filter");
    }
    const double inf = std::numeric_limits<double>::infinity();
    double out = name == "column_min" ? inf : name == "column_max" ? -inf : 0;
    for (double v : kept) {
      if (std::isnan(v)) return v;
      out = name == "column_min" ? std::min(out, v) : name == "column_max" ? std::max(out, v) : out + v / kept.size();
    }
    return out;
  }

  double call(const std::string& name) {
    if (name == "column_min" || name == "column_max" || name == "column_mean") return aggregate(name);
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
    if (name == "min" || name == "max") {
      // Any number of arguments; one that is "–" (NaN) makes the result "–".
      double out = args[0];
      for (double v : args) {
        if (std::isnan(v)) return v;
        out = name == "min" ? std::min(out, v) : std::max(out, v);
      }
      return out;
    }
    const std::vector<std::string> functions = {"cell", "sum", "slope", "intercept", "column_min", "column_max",
                                                "column_mean", "sqrt", "abs", "ceil", "floor", "min", "max"};
    fail("unknown function '" + name + "'" + suggestion(name, functions));
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

namespace {

// Evaluates every value in order; `fail(index, what)` on the first mistake (it throws).
std::vector<double> evaluate_values(const ReportSpec& spec, const std::vector<BuiltTable>& tables, Rows rows,
                                    const std::function<void(std::size_t, const std::string&)>& fail) {
  std::map<std::string, double> known;
  std::set<std::string> pivot_tables;
  for (const auto& t : spec.tables)
    if (!t.pivot.empty()) pivot_tables.insert(t.name);
  std::vector<double> out;
  for (std::size_t i = 0; i < spec.values.size(); ++i) {
    try {
      out.push_back(Expression(spec.values[i].expr, tables, known, pivot_tables, rows).evaluate());
    } catch (const SpecError& e) {
      fail(i, e.what());
      throw;
    }
    known[spec.values[i].name] = out.back();
  }
  return out;
}

}  // namespace

void check_values(const ReportSpec& spec, const std::function<void(std::size_t, const std::string&)>& fail) {
  std::vector<BuiltTable> tables;
  for (const auto& t : spec.tables) tables.push_back(build_table(t, {}));
  evaluate_values(spec, tables, Rows::none_yet, fail);
}

std::vector<RenderedValue> compute_values(const ReportSpec& spec, const std::vector<BuiltTable>& tables,
                                          bool all_points) {
  const std::vector<double> xs =
      evaluate_values(spec, tables, all_points ? Rows::all_points : Rows::some_points,
                      [&](std::size_t i, const std::string& what) {
                        throw SpecError("report " + spec.id + ": value '" + spec.values[i].name + "': " + what);
                      });
  std::vector<RenderedValue> out;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    out.push_back({spec.values[i].name, x, std::isfinite(x) ? format_number(x, spec.values[i].format) : "–"});
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
