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

#include "base/text_distance.hpp"
#include "report/report.hpp"

namespace runner::report {
namespace {

// Recursive descent over: sum := product (('+'|'-') product)*; product := power (('*'|'/')
// power)*; power := unary ('^' unary)?; unary := '-' unary | atom; atom := number | name |
// name '(' args ')' | '(' sum ')'. Strings ("...") are arguments of functions only.
// What the tables hold: none of the records yet (the spec check before a run), every
// planned point's records, or only some (a smoke run, a partial run).
enum class Rows { none_yet, all_points, some_points };

// Two-sided p of the Mann-Whitney U test that samples a and b come from one distribution:
// exact (every ordering counted) without ties up to 50 samples in all, else the normal
// approximation with the tie and continuity corrections.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  std::vector<std::pair<double, int>> all;
  for (double x : a) all.push_back({x, 0});
  for (double x : b) all.push_back({x, 1});
  std::sort(all.begin(), all.end());
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double rank = (i + 1 + j) / 2.0, t = static_cast<double>(j - i);
    for (std::size_t k = i; k < j; ++k)
      if (all[k].second == 0) rank_sum_a += rank;
    tie_term += t * t * t - t;
    ties = ties || t > 1;
    i = j;
  }
  const double u = rank_sum_a - n1 * (n1 + 1) / 2.0;
  if (!ties && n <= 50) {
    // ways[i][j][k]: orderings of i a's and j b's where k (b, a) pairs have the a above.
    std::vector<std::vector<std::vector<double>>> ways(n1 + 1, std::vector<std::vector<double>>(n2 + 1));
    for (std::size_t i = 0; i <= n1; ++i)
      for (std::size_t j = 0; j <= n2; ++j) {
        ways[i][j].assign(i * j + 1, 0);
        if (i == 0 || j == 0) {
          ways[i][j][0] = 1;
          continue;
        }
        for (std::size_t k = 0; k <= i * j; ++k)  // the largest is an a (beats j b's) or a b
          ways[i][j][k] = (k >= j ? ways[i - 1][j][k - j] : 0) + (k <= i * (j - 1) ? ways[i][j - 1][k] : 0);
      }
    double total = 0, at_most = 0, at_least = 0;
    for (std::size_t k = 0; k <= n1 * n2; ++k) {
      total += ways[n1][n2][k];
      if (k <= u) at_most += ways[n1][n2][k];
      if (k >= u) at_least += ways[n1][n2][k];
    }
    return std::min(1.0, 2 * std::min(at_most, at_least) / total);
  }
  const double mean = n1 * n2 / 2.0;
  const double sd = std::sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (static_cast<double>(n) * (n - 1))));
  if (sd == 0) return 1;
  const double z = std::max(0.0, std::fabs(u - mean) - 0.5) / sd;
  return std::erfc(z / std::sqrt(2.0));
}

// A value computed so far: its number (a range's low end), the runs its cells came from.
struct Known {
  double value = 0, high = 0;  // high: a range's high end
  bool is_range = false, across = false;
  std::vector<std::string> runs;
};

class Expression {
 public:
  // `pivot_tables`: tables whose columns come from their records' pivot values.
  Expression(const std::string& text, const std::vector<BuiltTable>& tables, const std::map<std::string, Known>& known,
             const std::set<std::string>& pivot_tables, Rows rows)
      : text_(text), tables_(tables), known_(known), pivot_tables_(pivot_tables), rows_(rows) {}

  // The whole expression: one number, or range(low, high) at the top, whose two ends render
  // "low–high" (each end checked on its own for mixing runs). A value that combines cells of
  // two runs is refused unless across_runs(...) wraps it, which makes its text say so.
  Known evaluate() {
    Known out;
    skip();
    const std::size_t start = at_;
    if (text_.compare(at_, 5, "range") == 0) {
      at_ += 5;
      if (take('(')) {
        out.value = end_of_range(out);
        if (!take(',')) fail("range(low, high): expected ',' after the low end");
        out.high = end_of_range(out);
        if (!take(')')) fail("range(low, high): expected ')'");
        out.is_range = true;
      } else {
        at_ = start;
      }
    }
    if (!out.is_range) {
      out.value = sum();
      out.runs = one_run_or_across();
    }
    skip();
    if (at_ < text_.size()) fail("unexpected '" + text_.substr(at_, 1) + "'");
    if (out.is_range && out.value > out.high)
      fail("range(low, high): the low end " + shortest_number(out.value) + " is above the high end " +
           shortest_number(out.high) + "; swap them");
    out.across = across_;
    return out;
  }

 private:
  const std::string& text_;
  const std::vector<BuiltTable>& tables_;
  const std::map<std::string, Known>& known_;
  const std::set<std::string>& pivot_tables_;
  const Rows rows_;
  std::size_t at_ = 0;
  std::set<std::string> runs_;  // of every cell read so far in this (end of a) value
  bool across_ = false;          // across_runs(...) was written
  // Inside a column aggregate's column expression: its table, and the row it is read on.
  const BuiltTable* row_table_ = nullptr;
  const std::vector<std::string>* row_ = nullptr;

  double end_of_range(Known& out) {
    runs_.clear();
    const double v = sum();
    for (const auto& r : one_run_or_across()) out.runs.push_back(r);
    std::sort(out.runs.begin(), out.runs.end());
    out.runs.erase(std::unique(out.runs.begin(), out.runs.end()), out.runs.end());
    return v;
  }
  std::vector<std::string> one_run_or_across() const {
    if (runs_.size() > 1 && !across_) {
      std::string names;
      for (const auto& r : runs_) names += (names.empty() ? "" : " and ") + r;
      fail("combines cells of runs " + names + ", which may differ in more than what the prose compares (another "
           "machine, baseline or commit); compare cells of one run, or wrap the expression in across_runs(...) so "
           "its text says so");
    }
    return {runs_.begin(), runs_.end()};
  }
  void add_runs(const std::vector<std::string>& runs) { runs_.insert(runs.begin(), runs.end()); }

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

  // column_min / column_max / column_mean("table", column, "condition"...): over the rows
  // that every condition keeps (all rows without one). The column is a header ("fast / eager")
  // or an expression of the row's cells, each a quoted header: "flash" / "sdpa",
  // max("a", "b") / min("a", "b"). A kept row whose cell holds no number ("–", OOM) makes the
  // result "–", as one cell() would: never a 0, never skipped. No kept row is a mistake where
  // every point has its records, else "–".
  double aggregate(const std::string& name) {
    const std::string usage = name + "(\"table\", \"column\", \"key=value\"...)";
    const BuiltTable& t = table(string_arg());
    if (!take(',')) fail("expected " + usage);
    // Read once without a row (checks its headers, finds its end), then again for each kept row.
    const std::size_t column_at = at_;
    std::set<std::string> unused;
    column_expression(t, nullptr, column_at, unused);
    std::vector<Condition> conditions;
    std::string filter;
    while (take(',')) {
      conditions.push_back(condition(t, string_arg()));
      filter += std::string(filter.empty() ? "" : ", ") + "\"" + conditions.back().text + "\"";
    }
    const std::size_t after = at_;
    std::vector<double> kept;
    std::vector<std::set<std::string>> kept_runs;  // the runs of the cells each kept row read
    for (const auto& r : t.csv_rows) {
      bool keep = true;
      for (const Condition& c : conditions) keep = keep && matches(t, c, r);
      if (!keep) continue;
      kept_runs.emplace_back();
      kept.push_back(column_expression(t, &r, column_at, kept_runs.back()));
    }
    at_ = after;
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
    const std::set<std::string>* picked = nullptr;  // the row min/max picked; its runs are the value's
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const double v = kept[i];
      if (std::isnan(v)) return v;
      if (name == "column_mean") runs_.insert(kept_runs[i].begin(), kept_runs[i].end());
      if ((name == "column_min" && v < out) || (name == "column_max" && v > out)) picked = &kept_runs[i];
      out = name == "column_min" ? std::min(out, v) : name == "column_max" ? std::max(out, v) : out + v / kept.size();
    }
    if (picked) runs_.insert(picked->begin(), picked->end());
    return out;
  }

  // The aggregate's column expression at `from`, on row `r` of `t` (null: no row, every cell
  // "–"); the runs of the cells it reads go into `runs`, not the value's.
  double column_expression(const BuiltTable& t, const std::vector<std::string>* r, std::size_t from,
                           std::set<std::string>& runs) {
    const BuiltTable* outer_table = row_table_;
    const std::vector<std::string>* outer_row = row_;
    std::swap(runs, runs_);
    at_ = from;
    row_table_ = &t;
    row_ = r;
    const double v = sum();
    row_table_ = outer_table;
    row_ = outer_row;
    std::swap(runs, runs_);
    return v;
  }

  // The number in row `r`'s cell of column `col` (NaN: "–"), its runs counted as read.
  double read_cell(const BuiltTable& t, const std::vector<std::string>* r, std::size_t col) {
    add_runs(source_of(t, r, col).runs);
    return number_in(r, col);
  }

  // Where the number of a row's cell comes from (report.hpp); empty when nothing is known.
  static const CellSource& source_of(const BuiltTable& t, const std::vector<std::string>* r, std::size_t col) {
    static const CellSource none;
    if (r == nullptr || t.csv_rows.empty()) return none;
    const auto it = t.sources.find({static_cast<std::size_t>(r - t.csv_rows.data()), col});
    return it == t.sources.end() ? none : it->second;
  }

  // welch_t / mann_whitney_p("table", "row A", "column A", "row B", "column B"): whether two
  // cells differ beyond their noise, so a word like "within noise" rests on a number.
  double statistic(const std::string& name) {
    const std::string usage = name + "(\"table\", \"row A\", \"column A\", \"row B\", \"column B\")";
    const BuiltTable& t = table(string_arg());
    const CellSource* side[2];
    bool missing = false;
    std::string named[2];
    for (int i = 0; i < 2; ++i) {
      if (!take(',')) fail("expected " + usage);
      const std::string key = string_arg();
      if (!take(',')) fail("expected " + usage);
      const std::string header = string_arg();
      const std::size_t col = column(t, header);
      const std::vector<std::string>* r = row(t, key);
      side[i] = &source_of(t, r, col);
      missing = missing || std::isnan(number_in(r, col));
      named[i] = "cell (\"" + key + "\", \"" + header + "\")";
      add_runs(side[i]->runs);
    }
    if (missing) return std::nan("");  // "–", as the cell itself renders
    if (name == "welch_t") {
      for (int i = 0; i < 2; ++i)
        if (!(side[i]->n >= 2) || !std::isfinite(side[i]->std))
          fail("welch_t: " + named[i] + " of table '" + t.name + "' has no mean, sd and n >= 2 (a scalar or "
               "ratio column); it needs a stats metric's cell");
      const double va = side[0]->std * side[0]->std / side[0]->n, vb = side[1]->std * side[1]->std / side[1]->n;
      return (side[0]->mean - side[1]->mean) / std::sqrt(va + vb);
    }
    for (int i = 0; i < 2; ++i)
      if (side[i]->samples.size() < 2)
        fail("mann_whitney_p: " + named[i] + " of table '" + t.name + "' kept no samples in its record; use "
             "welch_t(...) on its mean, sd and n");
    return mann_whitney_p(side[0]->samples, side[1]->samples);
  }

  // peer(column expression, "key=value"...): in a column aggregate's column, the expression on
  // the row whose keys equal this row's but for the named ones, which take the given values:
  // ("forward" + "backward") / peer("forward" + "backward", "attention.kernel=wgmma") sets each
  // kept row against its wgmma twin. No such row: "–" where points are missing, else a mistake.
  double peer() {
    const std::string usage = "peer(column expression, \"key=value\"...)";
    if (row_table_ == nullptr)
      fail(usage + " compares a row with its twin, so it belongs in the column of column_min, column_max or "
           "column_mean");
    const BuiltTable& t = *row_table_;
    const std::vector<std::string>* here = row_;
    // Read once without a row (checks its headers, finds its end), then on the twin.
    const std::size_t expression_at = at_;
    std::set<std::string> unused;
    column_expression(t, nullptr, expression_at, unused);
    std::vector<Condition> twin;
    while (take(',')) {
      twin.push_back(condition(t, string_arg()));
      if (twin.back().op != "=" || twin.back().alternatives.size() != 1)
        fail(usage + ": \"" + twin.back().text + "\" names one value of a row key (key=value)");
    }
    if (twin.empty()) fail("expected " + usage + ": the twin differs from the row in at least one key");
    const std::size_t after = at_;
    if (here == nullptr) return std::nan("");  // the column's first reading, without a row
    const std::vector<std::string>* found = nullptr;
    for (const auto& r : t.csv_rows) {
      bool same = true;
      for (std::size_t k = 0; k < t.row_key_columns && same; ++k) {
        const auto named = std::find_if(twin.begin(), twin.end(), [&](const Condition& c) { return c.key_column == k; });
        const std::string& want = named != twin.end() ? named->alternatives[0] : (*here)[k];
        same = k < r.size() && r[k] == want;
      }
      if (same) found = &r;
    }
    if (found == nullptr) {
      if (rows_ != Rows::all_points) return std::nan("");
      std::string key;
      for (std::size_t k = 0; k < t.row_key_columns && k < here->size(); ++k) key += (k ? ", " : "") + (*here)[k];
      fail(usage + ": table '" + t.name + "' has no row like \"" + key + "\" with " + twin[0].text +
           (twin.size() > 1 ? " and the other keys named" : "") + "; fix the keys");
    }
    std::set<std::string> runs;
    const double v = column_expression(t, found, expression_at, runs);
    runs_.insert(runs.begin(), runs.end());
    at_ = after;
    return v;
  }

  double call(const std::string& name) {
    if (name == "column_min" || name == "column_max" || name == "column_mean") return aggregate(name);
    if (name == "peer") return peer();
    if (name == "cell") {
      const BuiltTable& t = table(string_arg());
      if (!take(',')) fail("cell(\"table\", \"row\", \"column\")");
      const std::string key = string_arg();
      if (!take(',')) fail("cell(\"table\", \"row\", \"column\")");
      return read_cell(t, row(t, key), column(t, string_arg()));
    }
    if (name == "across_runs") {
      across_ = true;
      return sum();
    }
    if (name == "welch_t" || name == "mann_whitney_p") return statistic(name);
    if (name == "sum" || name == "slope" || name == "intercept") {
      const BuiltTable& t = table(string_arg());
      if (!take(',')) fail(name + "(\"table\", \"column\"...)");
      const std::size_t a_col = column(t, string_arg());
      const std::vector<double> a = column_values(t, a_col);
      for (const auto& r : t.csv_rows) add_runs(source_of(t, &r, a_col).runs);
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
    if (name == "range") fail("range(low, high) is a whole value, not part of an expression");
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
    const std::vector<std::string> functions = {"cell",       "sum",         "slope",      "intercept", "column_min",
                                                "column_max", "column_mean", "welch_t",    "mann_whitney_p",
                                                "across_runs", "range",      "sqrt",       "abs",       "ceil",
                                                "floor",      "min",         "max",         "peer"};
    fail("unknown function '" + name + "'" + suggestion(name, functions));
  }

  double atom() {
    skip();
    if (at_ < text_.size() && text_[at_] == '"') {
      const std::string header = string_arg();
      if (row_table_ == nullptr)
        fail("a quoted header \"" + header + "\" stands for a column only in the column of column_min, "
             "column_max or column_mean; elsewhere write cell(\"table\", \"row\", \"" + header + "\")");
      return read_cell(*row_table_, row_, column(*row_table_, header));
    }
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
    if (it->second.is_range) fail("'" + name + "' is a range; name each end as a value of its own to compute with it");
    add_runs(it->second.runs);
    if (it->second.across) across_ = true;
    return it->second.value;
  }
};

const std::regex kTemplate(R"(\{\{value ([A-Za-z0-9_]+)\}\})");
const std::regex kMarked(R"(<!-- runner:value ([A-Za-z0-9_]+) -->([\s\S]*?)<!-- runner:value end -->)");

}  // namespace

namespace {

// Evaluates every value in order; `fail(index, what)` on the first mistake (it throws).
std::vector<Known> evaluate_values(const ReportSpec& spec, const std::vector<BuiltTable>& tables, Rows rows,
                                   const std::function<void(std::size_t, const std::string&)>& fail) {
  std::map<std::string, Known> known;
  std::set<std::string> pivot_tables;
  for (const auto& t : spec.tables)
    if (!t.pivot.empty()) pivot_tables.insert(t.name);
  std::vector<Known> out;
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
  const std::vector<Known> xs =
      evaluate_values(spec, tables, all_points ? Rows::all_points : Rows::some_points,
                      [&](std::size_t i, const std::string& what) {
                        throw SpecError("report " + spec.id + ": value '" + spec.values[i].name + "': " + what);
                      });
  std::vector<RenderedValue> out;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Known& x = xs[i];
    const std::string& format = spec.values[i].format;
    std::string text = !std::isfinite(x.value) ? "–" : format_number(x.value, format);
    if (x.is_range && text != "–") {
      // Both ends, unless they read the same at this format (a constant: "0.062 at every seq").
      const std::string high = std::isfinite(x.high) ? format_number(x.high, format) : "–";
      text = high == "–" ? high : high == text ? text : text + "–" + high;
    }
    // The runs a value compares are named in its text (across_runs).
    if (x.across && x.runs.size() > 1) {
      std::string names;
      for (std::size_t r = 0; r < x.runs.size(); ++r)
        names += (r == 0 ? "" : r + 1 == x.runs.size() ? " and " : ", ") + x.runs[r];
      text += " (across runs " + names + ")";
    }
    out.push_back({spec.values[i].name, x.value, text});
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

std::string merge_cited_values(const std::string& markdown, const std::string& report_id,
                               const std::vector<RenderedValue>& values, const std::string& where) {
  // Report ids are [A-Za-z0-9_-]; '-' is the only one a regex would read.
  std::string id;
  for (char c : report_id) id += c == '-' ? std::string("\\-") : std::string(1, c);
  const std::regex templated("\\{\\{value " + id + "\\.([A-Za-z0-9_]+)\\}\\}");
  const std::regex marked("<!-- runner:value " + id + "\\.([A-Za-z0-9_]+) -->[\\s\\S]*?<!-- runner:value end -->");
  const auto text_of = [&](const std::string& name) -> const std::string& {
    for (const auto& v : values)
      if (v.name == name) return v.text;
    throw SpecError(where + ": value '" + report_id + "." + name + "' is not declared in report " + report_id +
                    "'s values: (experiments/<experiment>.yaml); declare it there or fix the name");
  };
  std::string rest = markdown, out;
  for (const std::regex* pattern : {&marked, &templated}) {
    out.clear();
    std::size_t last = 0;
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), *pattern); it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      out += rest.substr(last, it->position() - last);
      out += "<!-- runner:value " + report_id + "." + name + " -->" + text_of(name) + "<!-- runner:value end -->";
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
