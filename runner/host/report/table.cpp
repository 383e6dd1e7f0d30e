// Building one table from stored records: which records belong, rows, columns,
// cells (OOM/error/skipped/missing), ratios. Spec parsing is in spec.cpp, captions in
// caption.cpp, rendering in render.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "report/record_fields.hpp"
#include "report/report.hpp"

namespace runner::report {
namespace detail {

using nlohmann::json;

std::string render_value(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) return shortest_number(value.get<double>());
  return value.dump();  // arrays, objects, null: compact JSON
}

std::optional<std::string> lookup(const StoredRecord& record, const std::string& key) {
  if (const json* value = record.label_or_param(key)) return render_value(*value);
  return std::nullopt;
}

}  // namespace detail

namespace {

using nlohmann::json;
using detail::lookup;

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

bool matches(const StoredRecord& record, const std::map<std::string, std::string>& where) {
  for (const auto& [key, wanted] : where) {
    const auto value = lookup(record, key);
    if (!value || !values_equal(*value, wanted)) return false;
  }
  return true;
}

// A failed point (OOM, error) has its parameters but never emitted its labels, so a
// `where` on labels (table: phases) would hide it. It matches on the keys it has; at
// least `min_present` of them must be there, and every one present must agree.
bool matches_failed(const StoredRecord& record, const std::map<std::string, std::string>& where, std::size_t min_present) {
  std::size_t present = 0;
  for (const auto& [key, wanted] : where) {
    const auto value = lookup(record, key);
    if (!value) continue;
    if (!values_equal(*value, wanted)) return false;
    ++present;
  }
  return present >= min_present;
}

// Table level: any failed point of the table's part and parameters gets its row.
bool table_matches(const StoredRecord& record, const std::map<std::string, std::string>& where) {
  return record.failed() ? matches_failed(record, where, 0) : matches(record, where);
}
// Column level: a failed point fills a column only when it agrees on a key it has
// (mode: forward_backward), never on missing keys alone (pytorch_variant: eager).
bool column_matches(const StoredRecord& record, const std::map<std::string, std::string>& where) {
  return record.failed() ? matches_failed(record, where, where.empty() ? 0 : 1) : matches(record, where);
}

struct Cell {
  enum class Kind { missing, oom, error, skipped, timeout, invalid, number, text } kind = Kind::missing;
  bool failed() const { return kind == Kind::oom || kind == Kind::error || kind == Kind::skipped ||
                               kind == Kind::timeout || kind == Kind::invalid; }
  double value = 0, std = 0;
  bool has_std = false, integer = false;
  double rse = -1;        // relative standard error of the mean; < 0: unknown (a scalar)
  double threshold = 0;   // what counts as too noisy for this cell
  std::string text;
  CellSource source;      // for values (report.hpp)
};

std::vector<std::string> runs_of(const StoredRecord& record) {
  const auto name = record.observed.find(kSourceRunNameKey);
  if (name == record.observed.end() || !name->is_string()) return {};
  return {name->get<std::string>()};
}

// The record's own target when it was measured adaptively, else the table's.
double noise_threshold(const StoredRecord& record, double table_default) {
  const auto m = record.observed.find("measurement");
  if (m == record.observed.end()) return table_default;
  const json& first = m->is_array() && !m->empty() ? (*m)[0] : *m;
  if (!first.is_object()) return table_default;
  const double target = first.value("target_rel_stderr", 0.0);
  return target > 0 ? target : table_default;
}

Cell metric_cell(const StoredRecord& record, const std::string& metric, const std::string& stat,
                 double default_threshold) {
  Cell cell;
  if (record.failed()) {
    cell.kind = record.status == RecordStatus::oom       ? Cell::Kind::oom
                : record.status == RecordStatus::skipped ? Cell::Kind::skipped
                : record.status == RecordStatus::timeout ? Cell::Kind::timeout
                : record.status == RecordStatus::invalid ? Cell::Kind::invalid
                                                         : Cell::Kind::error;
    return cell;
  }
  const Metric* found = record.metric(metric);
  if (!found) return cell;
  cell.source.runs = runs_of(record);
  if (const auto* text = std::get_if<std::string>(&found->value)) {
    cell.kind = Cell::Kind::text;
    cell.text = *text;
  } else if (const auto* value = std::get_if<double>(&found->value)) {  // a scalar has no stats to pick from
    if (std::isnan(*value)) return cell;
    cell.kind = Cell::Kind::number;
    cell.value = *value;
  } else if (const auto& stats = std::get<Stats>(found->value); !std::isnan(stat_named(stats, stat))) {
    cell.kind = Cell::Kind::number;
    cell.value = stat_named(stats, stat);
    cell.integer = stat == "n";
    cell.source.mean = stats.mean;
    cell.source.std = stats.std;
    cell.source.n = static_cast<double>(stats.n);
    if (const auto extra = record.metric_extra.find(metric); extra != record.metric_extra.end())
      if (const auto samples = extra->second.find("samples"); samples != extra->second.end() && samples->is_array())
        for (const auto& x : *samples)
          if (x.is_number()) cell.source.samples.push_back(x.get<double>());
    if (!std::isnan(stats.std)) {
      cell.has_std = true;
      cell.std = stats.std;
    }
    if (!cell.integer) {
      cell.rse = record.rel_stderr(metric).value_or(-1);
      cell.threshold = noise_threshold(record, default_threshold);
    }
  }
  return cell;
}

Cell ratio_cell(const Cell& numerator, const Cell& denominator) {
  for (const Cell* side : {&numerator, &denominator})
    if (side->failed()) return *side;
  Cell cell;
  if (numerator.kind == Cell::Kind::number && denominator.kind == Cell::Kind::number &&
      denominator.value != 0) {
    cell.kind = Cell::Kind::number;
    cell.value = numerator.value / denominator.value;
    std::set<std::string> runs(numerator.source.runs.begin(), numerator.source.runs.end());
    runs.insert(denominator.source.runs.begin(), denominator.source.runs.end());
    cell.source.runs.assign(runs.begin(), runs.end());
    // Independent means: relative errors add in quadrature, and so do the targets.
    if (numerator.rse >= 0 && denominator.rse >= 0) {
      cell.rse = std::hypot(numerator.rse, denominator.rse);
      cell.threshold = std::hypot(numerator.threshold, denominator.threshold);
    }
  }
  return cell;
}

// A column with every default resolved; pivot values become where-filters.
struct Column {
  enum class Kind { metric, ratio, key } kind = Kind::metric;
  std::string header, metric, stat, format, key, link;
  bool show_std = false;
  std::string noise = "marker";
  std::map<std::string, std::string> where;
  std::size_t numerator = 0, denominator = 0;
};

std::string integer_text(double value) { return std::to_string(std::llround(value)); }

bool noisy(const Cell& cell, const Column& column) {
  return column.noise != "off" && cell.kind == Cell::Kind::number && cell.rse > cell.threshold;
}

std::string display(const Cell& cell, const Column& column) {
  switch (cell.kind) {
    case Cell::Kind::missing: return "–";
    case Cell::Kind::oom: return "OOM";
    case Cell::Kind::error: return "error";
    case Cell::Kind::skipped: return "skipped";
    case Cell::Kind::timeout: return "timeout";
    case Cell::Kind::invalid: return "invalid";
    case Cell::Kind::text: return cell.text;
    case Cell::Kind::number: break;
  }
  if (cell.integer) return integer_text(cell.value);
  std::string text = format_number(cell.value, column.format);
  if (column.show_std && cell.has_std) text += " ± " + format_number(cell.std, column.format);
  if (column.noise == "percent" && cell.rse >= 0) text += " ±" + format_number(100 * cell.rse, "%.2g") + "%";
  if (noisy(cell, column)) text += " †";
  return text;
}

std::string csv_rse(const Cell& cell) {
  return cell.kind == Cell::Kind::number && cell.rse >= 0 ? shortest_number(cell.rse) : "–";
}

std::string csv_value(const Cell& cell, bool std_part) {
  if (cell.kind != Cell::Kind::number) return display(cell, Column{});
  if (std_part) return cell.has_std ? shortest_number(cell.std) : "–";
  return cell.integer ? integer_text(cell.value) : shortest_number(cell.value);
}

std::vector<Column> resolve_columns(const TableSpec& spec, const std::vector<const StoredRecord*>& records) {
  const std::string default_stat = spec.stat.empty() ? "mean" : spec.stat;
  const std::string default_format = spec.format.empty() ? "%.3g" : spec.format;
  std::vector<Column> columns;
  if (!spec.pivot.empty()) {
    std::set<std::string> seen;
    for (const StoredRecord* record : records) {
      const std::string value = *lookup(*record, spec.pivot);  // filtered on presence
      if (!seen.insert(value).second) continue;
      Column column;
      column.header = value;
      column.metric = spec.metric;
      column.stat = default_stat;
      column.format = default_format;
      column.show_std = spec.show_std;
      column.noise = spec.noise;
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
    column.link = column_spec.link;
    column.stat = column_spec.stat.empty() ? default_stat : column_spec.stat;
    column.format = column_spec.format.empty() ? default_format : column_spec.format;
    column.show_std = column_spec.show_std < 0 ? spec.show_std : column_spec.show_std == 1;
    column.noise = column_spec.noise.empty() ? spec.noise : column_spec.noise;
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
bool belongs(const StoredRecord& record, const TableSpec& spec) {
  // A point cut short by Ctrl-C has no result; --resume records it again.
  if (record.status == RecordStatus::interrupted) return false;
  if (!spec.parts.holds(record.part)) return false;
  if (!table_matches(record, spec.where)) return false;
  // A failed point never got to emit its labels: it still gets a row (blank
  // label cells) so OOM and error stay visible.
  // Row keys select the records (a `moment` label picks the memory records). One
  // exception: an option of a plugin named by another row key, which other plugins do
  // not have (rows: [attention, attention.temperature] over naive and {name: scaled,
  // temperature: 1}): naive keeps its row, that cell blank, instead of vanishing.
  const bool point_failed = record.failed();
  for (const auto& key : spec.rows) {
    if (point_failed || lookup(record, key)) continue;
    const bool option_of_a_shown_plugin = std::any_of(spec.rows.begin(), spec.rows.end(), [&](const std::string& p) {
      return key.size() > p.size() && key.compare(0, p.size() + 1, p + ".") == 0 && lookup(record, p).has_value();
    });
    if (!option_of_a_shown_plugin) return false;
  }
  if (!spec.pivot.empty()) return lookup(record, spec.pivot).has_value();
  bool any_metric_column = false;
  for (const auto& column : spec.columns) {
    if (column.metric.empty()) continue;
    any_metric_column = true;
    if (column_matches(record, column.where)) return true;
  }
  return !any_metric_column;
}

// Which point a record is of (a merged file's source run, part, index).
std::string point_identity(const StoredRecord& r) {
  return r.observed.value(kSourceRunKey, nlohmann::json()).dump() + "\n" + r.part + "\n" +
         (r.point ? std::to_string(*r.point) : r.params.dump());
}

// Records of two points landing on one cell: the table shows the last and the other
// vanishes without a word (rows: [model.attention] over attention variants that
// differ only in a nested option). Said on stderr, with the cells' rows.
void warn_of_merged_points(const TableSpec& spec, const std::vector<Column>& columns,
                           const std::vector<const StoredRecord*>& members, const std::vector<std::size_t>& member_row,
                           const std::vector<std::vector<std::string>>& row_keys) {
  std::map<std::pair<std::size_t, std::size_t>, std::set<std::string>> points_of_cell;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const StoredRecord& record = *members[m];
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const Column& column = columns[c];
      if (column.kind == Column::Kind::ratio || !column_matches(record, column.where)) continue;
      const bool fills = column.kind == Column::Kind::key ? lookup(record, column.key).has_value()
                                                          : record.failed() || record.metric(column.metric);
      if (fills) points_of_cell[{member_row[m], c}].insert(point_identity(record));
    }
  }
  std::set<std::size_t> rows;
  for (const auto& [cell, points] : points_of_cell)
    if (points.size() > 1) rows.insert(cell.first);
  if (rows.empty()) return;
  std::string named;
  for (std::size_t row : rows) {
    if (!named.empty()) named += "; ";
    std::string keys;
    for (const auto& k : row_keys[row]) keys += (keys.empty() ? "" : ", ") + k;
    named += "(" + keys + ")";
    if (named.size() > 200) {
      named += " ...";
      break;
    }
  }
  std::cerr << "warning: table '" << spec.name << "': " << rows.size() << " row(s) hold records of more than one point "
            << named << "; each cell shows only the last. Add the parameter that tells them apart to rows\n";
}

}  // namespace

BuiltTable build_table(const TableSpec& spec, const std::vector<StoredRecord>& records) {
  std::vector<const StoredRecord*> members;
  for (const auto& record : records)
    if (belongs(record, spec)) members.push_back(&record);

  // Rows in first-appearance order; each member remembers its row.
  std::map<std::vector<std::string>, std::size_t> row_of_keys;
  std::vector<std::vector<std::string>> row_keys;
  std::vector<std::size_t> member_row;
  for (const StoredRecord* record : members) {
    std::vector<std::string> keys;
    for (const auto& key : spec.rows) keys.push_back(lookup(*record, key).value_or(""));
    const auto [it, inserted] = row_of_keys.emplace(keys, row_keys.size());
    if (inserted) row_keys.push_back(keys);
    member_row.push_back(it->second);
  }

  const std::vector<Column> columns = resolve_columns(spec, members);
  warn_of_merged_points(spec, columns, members, member_row, row_keys);
  std::vector<std::vector<Cell>> grid(row_keys.size(), std::vector<Cell>(columns.size()));
  for (std::size_t row = 0; row < row_keys.size(); ++row) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const Column& column = columns[c];
      if (column.kind == Column::Kind::ratio) continue;  // needs its inputs first
      // Walk backwards: a point re-run later (appended) wins over the earlier one.
      for (std::size_t m = members.size(); m-- > 0;) {
        const StoredRecord& record = *members[m];
        if (member_row[m] != row || !column_matches(record, column.where)) continue;
        if (column.kind == Column::Kind::key) {
          if (const auto value = lookup(record, column.key)) {
            grid[row][c].kind = Cell::Kind::text;
            grid[row][c].text = *value;
            break;
          }
        } else if (record.failed() || record.metric(column.metric)) {
          // Records of one point may carry different metrics; skip those without ours.
          grid[row][c] = metric_cell(record, column.metric, column.stat, spec.noise_threshold);
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
    if (column.noise == "percent") table.csv_header.push_back(column.header + " rel_stderr");
  }
  bool any_noisy = false, any_percent = false;
  for (std::size_t row = 0; row < row_keys.size(); ++row) {
    std::vector<std::string> cells = row_keys[row], csv = row_keys[row];
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (!columns[c].link.empty() && grid[row][c].kind == Cell::Kind::text) {
        // The file's name, linked where the report keeps it (the run recorded where it wrote it).
        const std::string name = std::filesystem::path(grid[row][c].text).filename().string();
        table.links[{row, cells.size()}] = columns[c].link + "/" + name;
        cells.push_back(name);
        csv.push_back(columns[c].link + "/" + name);
        if (columns[c].show_std) csv.push_back("–");
        if (columns[c].noise == "percent") csv.push_back("–");
        continue;
      }
      cells.push_back(display(grid[row][c], columns[c]));
      if (grid[row][c].kind == Cell::Kind::number) table.sources[{row, csv.size()}] = grid[row][c].source;
      csv.push_back(csv_value(grid[row][c], false));
      if (columns[c].show_std) csv.push_back(csv_value(grid[row][c], true));
      if (columns[c].noise == "percent") csv.push_back(csv_rse(grid[row][c]));
      if (noisy(grid[row][c], columns[c])) any_noisy = true;
      if (columns[c].noise == "percent" && grid[row][c].rse >= 0) any_percent = true;
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
  table.caption = detail::caption(spec, members, shown_keys);
  if (any_percent) table.caption += " ±x% after a value: relative standard error of its mean (std / sqrt(n) / mean).";
  if (any_noisy)
    table.caption += " † noisy: relative standard error of the mean above the run's target_rel_stderr, or above " +
                     format_number(100 * spec.noise_threshold, "%.3g") +
                     "% where it had none (a ratio: its two sides' limits in quadrature).";
  bool any_missing = false, any_timeout = false, any_invalid = false;
  for (const auto& row : grid)
    for (const Cell& cell : row) {
      any_missing = any_missing || cell.kind == Cell::Kind::missing;
      any_timeout = any_timeout || cell.kind == Cell::Kind::timeout;
      any_invalid = any_invalid || cell.kind == Cell::Kind::invalid;
    }
  if (any_missing) table.caption += " – = no record for this cell (not run, skipped, or the metric does not apply).";
  if (any_timeout) table.caption += " timeout = the point ran past measure.timeout_s and was stopped.";
  if (any_invalid)
    table.caption += " invalid = the point finished without a usable number (a metric NaN or infinite, or no "
                     "record at all; its record's error says which).";
  return table;
}

}  // namespace runner::report
