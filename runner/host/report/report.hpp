// Report renderer: tables built from stored result records (results.jsonl) and
// written as GitHub Markdown, LaTeX (booktabs) and CSV. It only reads records;
// nothing here measures, and nothing here needs LibTorch.
//
// Flow: parse_report_spec (experiment YAML) -> read_results -> build_table per
// table -> to_markdown / to_latex / to_csv; write_report does all of it and keeps
// the prose authors wrote in reports/<id>/<id>.md outside the runner markers.
#pragma once
#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "runner/printable.hpp"
#include "runner/stored_record.hpp"

namespace runner::report {

// A mistake in the report spec (exit code 2, like other config errors).
class SpecError : public std::runtime_error {
 public:
  // Control characters from the spec are kept visible as escapes (printable.hpp).
  explicit SpecError(const std::string& what) : std::runtime_error(printable(what)) {}
};

// One column of an explicit column list; exactly one of metric, ratio, key is set.
struct ColumnSpec {
  std::string id;      // optional; what ratio columns refer to
  std::string header;  // defaults to id, metric or key
  std::string metric;  // a metric of the records (stats, scalar or text)
  std::string stat;    // n|mean|std|median|min|max; empty = table's stat, else mean
  std::string format;  // printf-style; empty = table's format, else "%.3g"
  int show_std = -1;   // -1 = as the table says; 0/1 as set on the column
  std::string noise;   // marker|percent|off; empty = as the table says
  std::map<std::string, std::string> where;  // extra record filter for this column
  std::vector<std::string> ratio;             // {numerator id, denominator id}
  std::string key;                            // a params/labels value shown as is
  // A text metric that names a file the run wrote (a figure): the cell shows the file's name
  // and links <link>/<name>, relative to the report's folder, where the file is kept now.
  std::string link;
};

// The parts whose records a table or figure reads (`part:` one name or a list), empty: all.
struct PartSelection {
  std::vector<std::string> names;
  bool holds(const std::string& part) const {
    return names.empty() || std::find(names.begin(), names.end(), part) != names.end();
  }
};

struct TableSpec {
  std::string name;  // [a-z0-9_]+, unique in the report
  std::string title, question, caption;
  PartSelection parts;
  std::map<std::string, std::string> where;  // params/labels must equal these
  std::vector<std::string> rows;             // row keys (labels first, then params; env.<field>)
  std::vector<ColumnSpec> columns;           // either columns ...
  std::string pivot;                         // ... or pivot key + metric
  std::string metric;
  std::string stat, format;  // defaults for pivot cells and for columns
  bool show_std = false;
  // How cells show their noise, the relative standard error of the mean
  // (std / sqrt(n) / mean, from the record's stats): marker = " †" after cells
  // above the threshold; percent = " ±x%" after every measured cell (and the
  // marker); off = nothing. The threshold is the record's target_rel_stderr when
  // it was measured adaptively, else noise_threshold.
  std::string noise = "marker";
  double noise_threshold = 0.05;
};

// A figure drawn from the same records as the tables: one point per (panel,
// series, x) with the metric's stat as y; plotted by scripts/figures/plot.py
// (matplotlib) into <reports>/figures/<report id>-<name>.{svg,pdf}.
struct FigureSpec {
  std::string name;  // [a-z0-9_]+, unique among the report's figures
  std::string title, question, caption;
  PartSelection parts;
  std::string kind = "line";                 // line | bar (x as categories)
  std::map<std::string, std::string> where;  // params/labels must equal these
  std::string x;                             // key on the x axis
  std::vector<std::string> series;           // keys whose values make one line (or bar colour) each
  std::string panel;                         // key: one subplot per value (optional)
  std::string metric, stat;                  // y; stat defaults to mean (scalar metrics: their value)
  bool logx = false, logy = false, error_bars = false;  // error_bars: ± std of the stat's samples
  std::string xlabel, ylabel;
  std::map<std::string, std::string> legend;  // series text -> label shown
};

// A number the prose quotes (`{{value name}}` in <id>.md, \val{<id>.name} in LaTeX),
// computed from the report's tables at full precision: numbers, earlier values by name,
// + - * / ^, cell("table", "row keys", "column"), sum("table", "column"),
// slope/intercept("table", "x column", "y column") (least squares),
// column_min/column_max/column_mean("table", "column", "key=value"...) over the rows a
// filter on row keys keeps (the column a header, or an expression of the row's cells, each a
// quoted header: "flash" / "sdpa", max("a", "b"); peer(expr, "key=value"...) reads expr on the row
// whose keys differ only in the named ones), sqrt, abs, ceil, floor, min and max (any number of arguments);
// welch_t("table", "row A", "column A", "row B", "column B") from the two cells' mean, sd and
// n, mann_whitney_p(same arguments) from their samples: what backs "within noise".
// A whole value may be range(low, high), rendered "low–high" (low <= high). A value whose
// cells come from two runs of a merged report is refused unless across_runs(expr) wraps
// it; its text then ends "(across runs A and B)".
struct ValueSpec {
  std::string name;    // [a-z0-9_]+, unique in the report
  std::string expr;
  std::string format = "%.3g";
};

struct ReportSpec {
  std::string id, title;
  std::vector<TableSpec> tables;
  std::vector<FigureSpec> figures;
  std::vector<ValueSpec> values;
  // What a table or figure without its own `question` answers: the id unless the report answers
  // several questions (one report of records shared by two assignment questions).
  std::string question;
};

// Throws SpecError("<file>:<line>:<col>: report.tables[0].colums: unknown
// key; did you mean 'columns'?") and the like for every spec mistake.
ReportSpec parse_report_spec(const YAML::Node& report_node, const std::string& file);

// read_records with every field's JSON type checked (a table of a hand-edited file
// would show nonsense): throws "<path>:<line>: ..." on a malformed line, except a
// malformed last line (a record cut off by a kill), which is skipped with a warning
// in `warnings` (or on stderr when null).
std::vector<StoredRecord> read_results(const std::filesystem::path& results_jsonl,
                                         std::vector<std::string>* warnings = nullptr);

// What the records alone cannot say about the run they came from.
struct RunSummary {
  bool smoke = false;              // run with --smoke: shrunk sizes, not measurements
  std::size_t planned_points = 0;  // points the sweep has (0: unknown)
  // --allow-dirty: records of a tree with uncommitted changes or of an unknown commit may
  // render into the project's reports; every caption then says so (run_sentence).
  bool allow_dirty = false;
};
// The commits the records name that the history cannot reproduce: "<commit>-dirty" (the tree
// had uncommitted changes) and "unknown" (no git_commit); sorted, distinct.
std::vector<std::string> unclean_commits(const std::vector<StoredRecord>& records);
// Whether `reports_dir` is the project's committed reports (it holds renders.txt), which
// refuse unclean records unless --allow-dirty.
bool is_committed_reports(const std::filesystem::path& reports_dir);
// Records merged from several runs (`runner report RUN RUN...`) carry the index of
// their run under this key, so each run's points count on their own.
inline constexpr const char* kSourceRunKey = "source_run";
// ... and the name of that run ("ddp_scaling/data", "ddp_scaling/runs/four_gpus"), which a
// value that compares cells of two runs must name (values.cpp: across_runs).
inline constexpr const char* kSourceRunNameKey = "source_run_name";
// Points with at least one record (distinct run/part/point).
std::size_t recorded_points(const std::vector<StoredRecord>& records);
// "Smoke run (--smoke): ...", "Partial run: records for 9 of 23 points.", with
// --allow-dirty the unclean commits the records name, or "".
std::string run_sentence(const RunSummary& run, const std::vector<StoredRecord>& records);

// Where a cell's number comes from, for values that compare cells (values.cpp): the runs
// behind it (empty for a report of one run; a ratio column's cell has both sides' runs) and
// its metric's sample statistics (NaN / 0 / none where the record has no stats).
struct CellSource {
  std::vector<std::string> runs;  // sorted, distinct
  double mean = std::numeric_limits<double>::quiet_NaN(), std = std::numeric_limits<double>::quiet_NaN();
  double n = 0;
  std::vector<double> samples;  // the metric's samples where the record kept them
};

// A table ready to render. `cells` holds display text (formatted numbers, "OOM",
// "error", "–" for not measured); `csv_rows` holds numbers at full precision, with
// one extra "<header> std" column after each show_std column.
struct BuiltTable {
  std::string name, title, caption;
  std::size_t row_key_columns = 0;  // leading columns that hold row keys
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> csv_header;
  std::vector<std::vector<std::string>> csv_rows;
  // (row, csv column) -> where that cell's number comes from; numbers only.
  std::map<std::pair<std::size_t, std::size_t>, CellSource> sources;
  // (row, column of `cells`) -> the Markdown link target of that cell (a link: column).
  std::map<std::pair<std::size_t, std::size_t>, std::string> links;
};

BuiltTable build_table(const TableSpec& spec, const std::vector<StoredRecord>& records);

// "## title", pipe table, "*caption*"; without the runner markers.
std::string to_markdown(const BuiltTable& table);
// One table environment, labelled tab:<report_id>:<name>.
std::string to_latex(const BuiltTable& table, const std::string& report_id);
// RFC 4180 quoting, "\n" line ends.
std::string to_csv(const BuiltTable& table);

// Replaces what lies between each table's markers in `existing`, keeping every
// other byte; appends tables that have no markers yet. An empty `existing` starts
// a new file with "# <title>" and a note on the markers.
std::string merge_markdown(const std::string& existing, const std::string& title,
                           const std::vector<BuiltTable>& tables);
// The same for blocks between <!-- runner:figure <name> begin/end --> markers.
std::string merge_markdown_blocks(const std::string& existing, const std::string& kind,
                                  const std::vector<std::pair<std::string, std::string>>& name_and_body);

// `runner report --pdf`: latexmk on <reports_dir>/writeup.tex into writeup.pdf. Throws
// a one-line error when latexmk is missing, the build fails, or the log reports an
// undefined reference or a missing input file (the first such line of writeup.log).
std::filesystem::path build_pdf(const std::filesystem::path& reports_dir);
// The first line of a LaTeX log that makes the build unacceptable, or "".
std::string latex_log_problem(const std::string& log);

// Figures (figure.cpp). The points of one figure as the plotting script reads them:
// {name, kind, title, xlabel, ylabel, logx, logy, panels: [{title, series: [{label,
// points: [{x, y, std?}]}]}], not_plotted: [...]}; x is a number when every x value of
// the figure parses as one, else text (categories).
nlohmann::json figure_data(const FigureSpec& spec, const std::vector<StoredRecord>& records);
struct FigureOutcome {
  std::vector<std::filesystem::path> written;  // svg and pdf of every figure drawn
  std::string problem;  // one line when none could be drawn (no matplotlib, script failed)
};
// Runs `<python> scripts/figures/plot.py` once for all figures of the report. Python:
// $RUNNER_PYTHON, else the interpreter the build was configured with.
// Into <report_dir>/figures/ (report_dir: the report's own folder, <reports>/<id>).
FigureOutcome draw_figures(const ReportSpec& spec, const std::vector<StoredRecord>& records,
                           const std::filesystem::path& report_dir);
// Markdown image block and LaTeX figure environment (PDF, with a boxed note when the
// file is absent, so the writeup still builds without matplotlib).
std::string figure_markdown(const FigureSpec& spec, const std::string& report_id, const std::string& caption);
std::string figure_latex(const FigureSpec& spec, const std::string& report_id, const std::string& caption);
std::string figure_caption(const FigureSpec& spec, const std::vector<StoredRecord>& records);

// Values (values.cpp).
struct RenderedValue {
  std::string name;
  double value;
  std::string text;  // formatted with the value's format
};
// In declaration order; a SpecError names the report, the value and what is wrong.
// `all_points`: the records hold every planned point, so a column aggregate whose filter
// keeps no row is a mistake; false (a smoke or partial run): that value renders "–".
std::vector<RenderedValue> compute_values(const ReportSpec& spec, const std::vector<BuiltTable>& tables,
                                          bool all_points = true);
// Before a run: every value's expression against the spec's tables without records (syntax,
// functions, table names, a columns: table's headers, filters' row keys, earlier names);
// calls fail(index of the value, what is wrong), which throws.
void check_values(const ReportSpec& spec, const std::function<void(std::size_t, const std::string&)>& fail);
// Replaces `{{value name}}` and the text between <!-- runner:value name --> and
// <!-- runner:value end --> by the value's text (between those markers).
std::string merge_values(const std::string& markdown, const std::string& report_id,
                         const std::vector<RenderedValue>& values);
// A Markdown file outside reports/ (a kernel's README) quotes a report's values by their full
// name, {{value <id>.<name>}}: rendered between <!-- runner:value <id>.<name> --> markers as
// merge_values does; other reports' values are left alone. `where` names the file in the error
// for a name the report does not declare.
std::string merge_cited_values(const std::string& markdown, const std::string& report_id,
                               const std::vector<RenderedValue>& values, const std::string& where);
// The Markdown files outside a project's reports that may quote its values: <root>/kernels/*/README.md
// (root: the folder above the reports), sorted.
std::vector<std::filesystem::path> citing_markdown(const std::filesystem::path& reports_dir);
// \runnervalue{<id>.<name>}{text} lines; the writeup defines \runnervalue and \val.
std::string values_latex(const std::string& report_id, const std::vector<RenderedValue>& values);

// Writes <dir>/<id>/<id>.md (merged), <id>.tex and <id>.<table>.csv (and figures/); returns their paths.
// `run` adds a smoke/partial-run sentence to every caption.
std::vector<std::filesystem::path> write_report(const ReportSpec& spec,
                                                const std::vector<StoredRecord>& records,
                                                const std::filesystem::path& reports_dir,
                                                const RunSummary& run = {});

// Helpers shared by the table builder and the tests.
std::string latex_escape(const std::string& text);
// printf-style with one floating conversion (or %d/%i, rounded); checked by
// check_number_format, which throws a message saying what is wrong.
std::string format_number(double value, const std::string& format);
void check_number_format(const std::string& format);
// Shortest text that reads back as the same double (CSV, rendered params).
std::string shortest_number(double value);

}  // namespace runner::report
