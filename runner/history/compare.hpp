// Compare two sets of records (a baseline A and a candidate B) point by point and
// metric by metric: the ratio B/A of the medians, a two-sided Mann-Whitney U test
// over the per-step samples, and a verdict. A change within the relative noise
// threshold is "same"; a larger change is a verdict (faster/slower, or
// smaller/larger for memory) only when the test is significant at alpha, else
// "noisy". Single values (peak memory) have no test: the threshold decides.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "history/store.hpp"

namespace runner::history {

struct CompareOptions {
  double threshold = 0.05;  // relative change below which a metric is "same"
  double alpha = 0.05;      // significance level of the U test
  bool cross_device = false;
  bool only_changed = false;           // rendering: drop "same" rows
  std::vector<std::string> metrics;    // only these metrics (empty: all numeric)
  std::vector<std::string> ignore_params;  // left out of the point identity (A/B of one knob)
};

// One side of a comparison: the records and the runs they came from.
struct Side {
  std::string spec;         // what the user wrote
  std::string description;  // e.g. "run 42 (exp, commit abc123, NVIDIA H100, 2026-11-23T02:00:00Z)"
  std::vector<RunInfo> runs;
  std::vector<HistoryRecord> records;
};

struct CompareRow {
  std::string experiment, point, metric, unit;
  double a = 0, b = 0, ratio = 1;  // medians (or values) and b / a
  double p_value = -1;              // -1: no test (single values or a failed point)
  std::string test;                 // "U exact", "U", "t (no samples)", "-"
  std::int64_t n_a = 0, n_b = 0;
  std::string verdict;  // faster slower smaller larger higher lower same noisy failed fixed still-failing
  bool regression = false;
  // Why the table and Markdown leave the row out unless --metric names it (JSON keeps
  // it): "constant" (one value, no spread, equal on both sides: flop, bytes_moved),
  // "no direction" (a unit that says nothing about better: a loss, a count). "" = shown.
  std::string hidden;
};

struct Comparison {
  Side a, b;
  CompareOptions options;
  std::vector<CompareRow> rows;
  std::vector<std::string> only_in_a, only_in_b;  // point labels
  std::vector<std::string> warnings;
  bool regression() const;
};

// Which way is better for a metric, from its unit: -1 lower (ms, bytes),
// +1 higher (anything per second), 0 unknown (never a regression).
int better_direction(const std::string& unit);

Comparison compare(Side a, Side b, const CompareOptions& options);
// Whether the table and Markdown show a row: not hidden (or its metric named by
// --metric), and not `same` under --only-changed.
bool shown(const CompareRow& row, const CompareOptions& options);
// One metric of one point: ratio, test and verdict (point and metric names left empty).
CompareRow compare_metric(const MetricValue& a, const MetricValue& b, const CompareOptions& options);

// Resolves "run dir", "run:ID", "commit:SHA" / a bare hex SHA, "last", "last-good"
// into a Side. Relative queries take the experiment and device from `context`
// (the other side) or from `experiment`.
Side resolve_side(const std::string& spec, HistoryStore* store, const Side* context, const std::string& experiment);
bool is_relative_query(const std::string& spec);

void render_table(const Comparison& c, std::ostream& out, bool color);
void render_markdown(const Comparison& c, std::ostream& out);
// JSON for tools, streamed (rows one per line); comparison_json parses it back.
void write_json(const Comparison& c, std::ostream& out);
nlohmann::json comparison_json(const Comparison& c);

}  // namespace runner::history
