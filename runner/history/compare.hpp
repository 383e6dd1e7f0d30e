// Compare two sets of records (a baseline A and a candidate B) point by point and
// metric by metric. Points match on their identity (point_identity: experiment,
// parameters after overrides, device model and driver); two sides without a
// common point are an error ("nothing comparable"), never a pass.
// Each row has the ratio B/A of the medians, a test and a verdict. The test:
// per-step samples -> block bootstrap of the ratio of medians (autocorrelation);
// repetition means -> Welch's t over their logs (batch means); interleaved
// rounds (merge_rounds) -> a moderated t over their logs: each point's variance
// pooled with the compare's other points of the metric (variance_prior), since
// 3 rounds a side alone say little; summaries only -> Welch's t from mean, std,
// n. A change within the relative threshold is "same"; a larger one is a
// verdict (faster/slower, smaller/larger) when every sample of one side lies
// beyond every sample of the other by more than the threshold (steps and
// repetitions; never rounds, which a slow spell moves whole), or when its
// Benjamini-Hochberg q over the compare's gating rows is below alpha; else
// "noisy", with a note saying what the test could detect.
// Gating: one primary metric per point (its whole-step time: the largest time
// metric) and memory values; rates derived from the step time (unit ".../s")
// are not tested again ("derived"); other metrics are shown but never gate.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <map>
#include <stdexcept>
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
  // Conbench-style lookback: the gating metric's medians in earlier good runs,
  // per point identity and metric ("<identity>\n<metric>", oldest first; see
  // add_lookback). With 3 or more, a change whose B lies within lookback_z
  // standard deviations (of the logs) of that history is `noisy`: the point
  // moves that much from run to run anyway, whatever one run's steps say.
  std::map<std::string, std::vector<double>> lookback;
  double lookback_z = 5;
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
  double q_value = -1;              // BH-adjusted p over the gating rows; -1: not gating or no test
  std::string test;                 // "block bootstrap", "U exact", "t over repetitions", "moderated t over rounds", "t (no samples)", "-"
  std::string identity;             // point_identity of the point (with device unless --cross-device)
  bool gating = false;              // the point's primary metric or a memory value
  bool separated = false;           // every sample of B beyond every sample of A by more than the threshold
  double detectable = -1;           // relative change the test detects at this spread (about); -1 unknown
  std::string note;                 // why a verdict could not be reached ("3 repetitions: ...")
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
  // Plugins whose .so differs between A and B in matched points, e.g.
  // "task/echo: sha256 1a2b3c4d -> 5e6f7a8b (commit abc -> def)".
  std::vector<std::string> build_changes;
  bool regression() const;
};

// The metric of a record that gates a compare and gets a trend chart: its
// whole-step time (the largest time metric over 2+ steps), else its first
// rate; "" when it has neither.
std::string primary_metric(const HistoryRecord& r);

// Which way is better for a metric, from its unit: -1 lower (ms, bytes),
// +1 higher (anything per second), 0 unknown (never a regression).
int better_direction(const std::string& unit);

// No point of one side has the identity of a point of the other (different
// experiments, parameters, devices): the CLI exits 2.
struct NothingComparable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Comparison compare(Side a, Side b, const CompareOptions& options);
// Whether the table and Markdown show a row: not hidden (or its metric named by
// --metric), and not `same` under --only-changed.
bool shown(const CompareRow& row, const CompareOptions& options);
// One metric of one point: ratio, test, raw p and verdict as if it gated alone
// (point and metric names left empty; compare() adjusts p over the points).
CompareRow compare_metric(const MetricValue& a, const MetricValue& b, const CompareOptions& options);

// Resolves "run dir", "run:ID", "commit:SHA" / a bare hex SHA, "last", "last-good"
// into a Side. Relative queries take the experiment and device from `context`
// (the other side) or from `experiment`. With a context, "last" and "last-good"
// are chosen per point: for each point of the context, the newest finished run
// (last-good: without failed points and not judged a regression) of the same
// experiment, device and smoke setting, started before the context's run, that
// has a point of the same identity. NothingComparable when no run has any.
Side resolve_side(const std::string& spec, HistoryStore* store, const Side* context, const std::string& experiment,
                  const CompareOptions& options = {});
// Fills options.lookback from the history: the newest `runs` good finished
// runs of B's experiment on B's device started before B (B left out).
void add_lookback(CompareOptions& options, HistoryStore& store, const Side& b, int runs = 10);
// The parameters --ignore-param takes out of the point identity: "a,b" and
// repeated flags; throws std::invalid_argument naming a parameter no record has.
void apply_ignore_params(Side& side, const std::vector<std::string>& names);
// One line for logs and the history: "2 slower, 18 same; 1 only in baseline".
std::string verdict_counts(const Comparison& c);
bool is_relative_query(const std::string& spec);

void render_table(const Comparison& c, std::ostream& out, bool color);
void render_markdown(const Comparison& c, std::ostream& out);
// JSON for tools, streamed (rows one per line); comparison_json parses it back.
void write_json(const Comparison& c, std::ostream& out);
nlohmann::json comparison_json(const Comparison& c);

}  // namespace runner::history
