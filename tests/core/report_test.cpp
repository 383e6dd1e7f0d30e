// Report renderer: tables from stored records as Markdown, LaTeX and CSV.
// Golden files live in tests/golden/report/; RUNNER_UPDATE_GOLDEN=1 rewrites them
// from the current output (read the diff before committing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "report/report.hpp"
#include "record_lines.hpp"

namespace runner::report {
namespace {

using nlohmann::json;
using Rows = std::vector<std::vector<std::string>>;

const std::filesystem::path kGoldenDir = std::filesystem::path(RUNNER_SOURCE_DIR) / "tests/golden/report";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void expect_matches_golden(const std::string& actual, const std::string& golden_name) {
  const std::filesystem::path golden = kGoldenDir / golden_name;
  const char* update = std::getenv("RUNNER_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    write_file(golden, actual);
    std::cout << "rewrote " << golden << "\n";
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden << " missing; run with RUNNER_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, read_file(golden)) << "differs from " << golden;
}

// std::filesystem::remove_all is not used: libtorch.so exports its own copy of it
// (it bundles libstdc++fs), which wins symbol lookup and crashes.
void remove_tree(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(std::filesystem::symlink_status(path)))
    for (const auto& entry : std::filesystem::directory_iterator(path)) remove_tree(entry.path());
  std::filesystem::remove(path);
}

// A fresh directory per test, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           ("runner_report_" + std::string(info->test_suite_name()) + "_" + info->name());
    remove_tree(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { remove_tree(path); }
};

const json kEnv = {{"device", "cuda"},         {"gpu", "NVIDIA H100 80GB HBM3"},
                   {"driver", "580.159.04"},   {"cuda_runtime", "13.0"},
                   {"libtorch", "2.11.0"},     {"host", "gpu-1"}};

json record(const json& params, const json& metrics, const std::string& status = "ok") {
  json r = {{"experiment", "x"}, {"part", "main"},  {"point", 0},      {"status", status},
            {"params", params},  {"labels", json::object()}, {"metrics", metrics}, {"env", kEnv}};
  if (status != "ok") r["error"] = "it failed";
  return r;
}

json tflops(double value) { return {{"tflops", {{"unit", "TFLOP/s"}, {"value", value}}}}; }

json time_ms(double mean, double std) {
  return {{"time_ms", {{"unit", "ms"}, {"n", 10}, {"mean", mean}, {"std", std}, {"median", mean - 0.5},
                       {"min", mean - 1}, {"max", mean + 1}}}};
}

// One table from a YAML flow mapping, parsed as a report would be.
TableSpec table(const std::string& yaml_flow) {
  return parse_report_spec(YAML::Load("{id: r, tables: [" + yaml_flow + "]}"), "test.yaml").tables.at(0);
}

std::string spec_error(const std::string& yaml) {
  try {
    parse_report_spec(YAML::Load(yaml)["report"], "experiments/x.yaml");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- golden files -------------------------------------------------------------

std::filesystem::path write_golden_report(const TempDir& dir) {
  const YAML::Node experiment = YAML::LoadFile((kGoldenDir / "experiment.yaml").string());
  const ReportSpec spec = parse_report_spec(experiment["report"], "experiment.yaml");
  write_report(spec, read_results(kGoldenDir / "results.jsonl"), dir.path);
  return dir.path / "device_ceilings";  // one folder per report id
}

TEST(ReportGolden, MarkdownReportMatchesGolden) {
  TempDir dir;
  expect_matches_golden(read_file(write_golden_report(dir) / "device_ceilings.md"), "device_ceilings.md");
}

TEST(ReportGolden, LatexReportMatchesGolden) {
  TempDir dir;
  expect_matches_golden(read_file(write_golden_report(dir) / "device_ceilings.tex"), "device_ceilings.tex");
}

TEST(ReportGolden, PivotTableCsvMatchesGolden) {
  TempDir dir;
  const auto out = write_golden_report(dir) / "device_ceilings.ceilings.csv";
  expect_matches_golden(read_file(out), "device_ceilings.ceilings.csv");
}

TEST(ReportGolden, ColumnsTableCsvMatchesGolden) {
  TempDir dir;
  const auto out = write_golden_report(dir) / "device_ceilings.timing.csv";
  expect_matches_golden(read_file(out), "device_ceilings.timing.csv");
}

TEST(ReportGolden, WriteReportNamesEveryFileItWrote) {
  TempDir dir;
  const YAML::Node experiment = YAML::LoadFile((kGoldenDir / "experiment.yaml").string());
  const auto written = write_report(parse_report_spec(experiment["report"], "experiment.yaml"),
                                    read_results(kGoldenDir / "results.jsonl"), dir.path);
  const std::vector<std::filesystem::path> expected = {
      dir.path / "device_ceilings" / "device_ceilings.md", dir.path / "device_ceilings" / "device_ceilings.tex",
      dir.path / "device_ceilings" / "device_ceilings.ceilings.csv",
      dir.path / "device_ceilings" / "device_ceilings.timing.csv"};
  EXPECT_EQ(written, expected);
}

// ---- cells ------------------------------------------------------------------

TEST(ReportTable, PivotColumnsAndRowsFollowFirstAppearance) {
  const std::vector<json> records = {record({{"size", 2}, {"dtype", "bf16"}}, tflops(1)),
                                     record({{"size", 1}, {"dtype", "fp32"}}, tflops(2)),
                                     record({{"size", 2}, {"dtype", "fp32"}}, tflops(3))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.header, (std::vector<std::string>{"size", "bf16", "fp32"}));
  EXPECT_EQ(built.cells, (Rows{{"2", "1", "3"}, {"1", "–", "2"}}));
}

TEST(ReportTable, OomAndErrorRecordsAreNamedInTheirCells) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, json::object(), "oom"),
                                     record({{"size", 1}, {"dtype", "b"}}, json::object(), "error")};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "OOM", "error"}}));
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "OOM", "error"}}));
}

TEST(ReportTable, CellWithoutAnyRecordIsEnDash) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, tflops(1)),
                                     record({{"size", 2}, {"dtype", "b"}}, tflops(2))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "1", "–"}, {"2", "–", "2"}}));
}

TEST(ReportTable, MetricMissingFromOkRecordIsEnDash) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, time_ms(5, 1))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "–"}}));
}

TEST(ReportTable, LastMatchingRecordWins) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, json::object(), "oom"),
                                     record({{"size", 1}, {"dtype", "b"}}, tflops(7)),
                                     record({{"size", 1}, {"dtype", "a"}}, tflops(5)),
                                     record({{"size", 1}, {"dtype", "b"}}, json::object(), "error")};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "5", "error"}}));
}

TEST(ReportTable, LaterRecordWithoutTheMetricDoesNotHideAnEarlierOne) {
  // One point may emit several records, each with different metrics.
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, tflops(5)),
                                     record({{"size", 1}, {"dtype", "a"}}, time_ms(3, 1))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "5"}}));
}

TEST(ReportTable, WhereComparesRenderedValues) {
  const std::vector<json> records = {
      record({{"size", 1}, {"dtype", "a"}, {"steps", 5}, {"fused", true}, {"scale", 0.5}}, tflops(1)),
      record({{"size", 2}, {"dtype", "a"}, {"steps", 6}, {"fused", true}, {"scale", 0.5}}, tflops(2)),
      record({{"size", 3}, {"dtype", "a"}, {"steps", 5}, {"fused", false}, {"scale", 0.5}}, tflops(3))};
  const BuiltTable built = build_table(
      table("{name: t, rows: [size], pivot: dtype, metric: tflops, where: {steps: 5, fused: true, scale: 0.50}}"),
      records);
  EXPECT_EQ(built.cells, (Rows{{"1", "1"}}));
}

TEST(ReportTable, PartFilterKeepsOnlyThatPart) {
  json other = record({{"size", 2}, {"dtype", "a"}}, tflops(2));
  other["part"] = "other";
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, tflops(1)), other};
  const BuiltTable built =
      build_table(table("{name: t, part: main, rows: [size], pivot: dtype, metric: tflops}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "1"}}));
}

TEST(ReportTable, LabelsAreLookedUpBeforeParams) {
  json labelled = record({{"size", 1}, {"tensor", "param"}}, tflops(1));
  labelled["labels"] = {{"tensor", "fc1_output"}};
  const BuiltTable built = build_table(table("{name: t, rows: [tensor], pivot: size, metric: tflops}"), stored({labelled}));
  EXPECT_EQ(built.cells, (Rows{{"fc1_output", "1"}}));
}

TEST(ReportTable, StatPicksTheStatisticAndNIsAnInteger) {
  const std::vector<json> records = {record({{"size", 1}}, time_ms(5, 0.1))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], columns: ["
                                             "{metric: time_ms, stat: median, format: '%.2f'},"
                                             "{metric: time_ms, stat: n, format: '%.2f'},"
                                             "{metric: time_ms}]}"),
                                       records);
  EXPECT_EQ(built.cells, (Rows{{"1", "4.50", "10", "5"}}));
}

TEST(ReportTable, ShowStdAppendsStdInTheColumnFormat) {
  const std::vector<json> records = {record({{"size", 1}}, time_ms(12.3456, 0.5678))};
  const BuiltTable built = build_table(
      table("{name: t, rows: [size], columns: [{header: T, metric: time_ms, format: '%.2f', show_std: true}]}"),
      records);
  EXPECT_EQ(built.cells, (Rows{{"1", "12.35 ± 0.57"}}));
  EXPECT_EQ(built.csv_header, (std::vector<std::string>{"size", "T", "T std"}));
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "12.3456", "0.5678"}}));
}

TEST(ReportTable, RatioDividesTwoColumnsOfTheSameRow) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "fp32"}}, tflops(3)),
                                     record({{"size", 1}, {"dtype", "bf16"}}, tflops(12))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], columns: ["
                                             "{id: slow, metric: tflops, where: {dtype: fp32}},"
                                             "{id: fast, metric: tflops, where: {dtype: bf16}},"
                                             "{header: x, ratio: [fast, slow], format: '%.2f×'}]}"),
                                       records);
  EXPECT_EQ(built.cells, (Rows{{"1", "3", "12", "4.00×"}}));
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "3", "12", "4"}}));
}

TEST(ReportTable, RatioPropagatesOomAndErrorAndIsEnDashWhenASideIsMissing) {
  const std::vector<json> records = {
      record({{"size", 1}, {"dtype", "fp32"}}, tflops(3)), record({{"size", 1}, {"dtype", "bf16"}}, {}, "oom"),
      record({{"size", 2}, {"dtype", "fp32"}}, {}, "error"), record({{"size", 2}, {"dtype", "bf16"}}, tflops(1)),
      record({{"size", 3}, {"dtype", "fp32"}}, tflops(3))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], columns: ["
                                             "{id: a, metric: tflops, where: {dtype: fp32}},"
                                             "{id: b, metric: tflops, where: {dtype: bf16}},"
                                             "{header: r, ratio: [a, b]}]}"),
                                       records);
  EXPECT_EQ(built.cells, (Rows{{"1", "3", "OOM", "OOM"}, {"2", "error", "1", "error"}, {"3", "3", "–", "–"}}));
}

// A failed point never emitted the labels a table selects on (a profiler's table: phases),
// yet its cells must say OOM. It matches on the keys it has; a column needs one of them.
TEST(ReportTable, OomPointsShowInTablesThatSelectOnLabels) {
  auto labelled = [](int size, const std::string& mode, double value) {
    json r = record({{"size", size}, {"mode", mode}}, tflops(value));
    r["labels"] = {{"table", "phases"}};
    return r;
  };
  const std::vector<json> records = {labelled(1, "fwd", 1), labelled(1, "bwd", 2), labelled(2, "fwd", 3),
                                     record({{"size", 2}, {"mode", "bwd"}}, json::object(), "oom")};
  const BuiltTable built = build_table(table("{name: t, rows: [size], where: {table: phases}, columns: ["
                                             "{header: f, metric: tflops, where: {mode: fwd}},"
                                             "{header: b, metric: tflops, where: {mode: bwd}},"
                                             "{header: v, metric: tflops, where: {variant: x}}]}"),
                                       records);
  EXPECT_EQ(built.cells, (Rows{{"1", "1", "2", "–"}, {"2", "3", "OOM", "–"}}));
}

TEST(ReportTable, TextMetricIsShownAsIs) {
  const std::vector<json> records = {record({{"size", 1}}, {{"dtype", {{"text", "float16"}}}})};
  const BuiltTable built =
      build_table(table("{name: t, rows: [size], columns: [{metric: dtype, format: '%.1f'}]}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "float16"}}));
}

// A text metric naming a file the run wrote: the cell shows its name and links it where the
// report keeps it (memory_profiling's timelines: recorded under reports/figures/, kept in the
// report's figures/); the CSV holds the link, LaTeX the name.
TEST(ReportTable, LinkColumnLinksTheRecordedFileWhereTheReportKeepsIt) {
  const std::vector<json> records = {
      record({{"size", 1}}, {{"timeline", {{"text", "reports/figures/r-fp32-0.svg"}}}}),
      record({{"size", 2}}, {{"other", {{"text", "x"}}}})};
  const BuiltTable built =
      build_table(table("{name: t, rows: [size], columns: [{header: Timeline, metric: timeline, link: figures/}]}"),
                  records);
  EXPECT_EQ(built.cells, (Rows{{"1", "r-fp32-0.svg"}, {"2", "–"}}));
  const std::string md = to_markdown(built);
  EXPECT_NE(md.find("| 1 | [r-fp32-0.svg](figures/r-fp32-0.svg) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | – |"), std::string::npos) << md;
  EXPECT_NE(to_csv(built).find("1,figures/r-fp32-0.svg"), std::string::npos) << to_csv(built);
  EXPECT_EQ(to_latex(built, "r").find("]("), std::string::npos);
  EXPECT_NE(spec_error("report: {id: r, tables: [{name: t, rows: [size], columns: [{key: size, link: figures}]}]}")
                .find("link: belongs to a metric column"), std::string::npos);
  EXPECT_NE(spec_error("report: {id: r, tables: [{name: t, rows: [size], columns: [{metric: m, link: ../x}]}]}")
                .find("a folder inside the report's folder"), std::string::npos);
}

TEST(ReportTable, KeyColumnShowsAParamValue) {
  const std::vector<json> records = {record({{"size", 1}, {"context_length", 256}}, tflops(2))};
  const BuiltTable built = build_table(
      table("{name: t, rows: [size], columns: [{metric: tflops}, {header: Context, key: context_length}]}"),
      records);
  EXPECT_EQ(built.header, (std::vector<std::string>{"size", "tflops", "Context"}));
  EXPECT_EQ(built.cells, (Rows{{"1", "2", "256"}}));
}

// ---- caption ----------------------------------------------------------------

TEST(ReportCaption, SetupSentenceNamesDeviceSoftwareStepsAndFixedParams) {
  const json params = {{"model.size", "small"}, {"precision", "fp32"},  {"batch_size", 4},
                       {"context_length", 256},  {"seed", 0},            {"device", "cuda"},
                       {"shape", {1, 2}},        {"measure.warmup_steps", 5}, {"measure.measured_steps", 10}};
  json other = params;
  other["model.size"] = "medium";
  other["seed"] = 1;
  const std::vector<json> records = {record(params, time_ms(1, 0)), record(other, time_ms(2, 0))};
  const BuiltTable built = build_table(
      table("{name: t, question: benchmarking_script, rows: [model.size], columns: [{metric: time_ms}]}"), records);
  EXPECT_EQ(built.caption,
            "Setup: NVIDIA H100 80GB HBM3 (cuda), driver 580.159.04, CUDA 13.0, LibTorch 2.11.0; "
            "warm-up 5, measured 10 steps, timed with CUDA events; fixed: batch_size=4, context_length=256, "
            "precision=fp32. "
            "Question: benchmarking_script.");
}

// One report of records shared by two questions: a table without its own question names both
// (ddp_overlap_individual_parameters and its _benchmarking question, issue 48).
TEST(ReportCaption, AReportsQuestionNamesEveryQuestionItsTablesAnswer) {
  TempDir dir;
  const ReportSpec spec = parse_report_spec(
      YAML::Load("{id: r, question: 'r, r_benchmarking', tables: [{name: t, rows: [size], pivot: dtype, metric: tflops}, "
                 "{name: u, question: own, rows: [size], pivot: dtype, metric: tflops}]}"),
      "test.yaml");
  write_report(spec, stored({record({{"size", 1}, {"dtype", "a"}}, tflops(1))}), dir.path);
  const std::string md = read_file(dir.path / "r" / "r.md");
  EXPECT_NE(md.find("Question: r, r_benchmarking.*\n<!-- runner:table t end -->"), std::string::npos) << md;
  EXPECT_NE(md.find("Question: own.*\n<!-- runner:table u end -->"), std::string::npos) << md;
}

TEST(ReportCaption, AuthorCaptionComesFirstAndColumnKeysAreNotCalledFixed) {
  const std::vector<json> records = {record({{"size", 1}, {"precision", "fp32"}, {"ctx", 8}, {"bs", 2}}, tflops(1))};
  const TableSpec spec = table("{name: t, rows: [size], caption: 'Higher is better.', columns: ["
                         "{metric: tflops, where: {precision: fp32}}, {key: ctx}]}");
  EXPECT_EQ(build_table(spec, records).caption,
            "Higher is better. Setup: NVIDIA H100 80GB HBM3 (cuda), driver 580.159.04, CUDA 13.0, "
            "LibTorch 2.11.0; fixed: bs=2.");
}

TEST(ReportCaption, VaryingWarmupIsSaid) {
  const std::vector<json> records = {
      record({{"size", 1}, {"measure.warmup_steps", 0}, {"measure.measured_steps", 10}}, tflops(1)),
      record({{"size", 1}, {"measure.warmup_steps", 2}, {"measure.measured_steps", 10}}, tflops(1))};
  const std::string caption =
      build_table(table("{name: t, rows: [size], pivot: measure.warmup_steps, metric: tflops}"), records).caption;
  EXPECT_NE(caption.find("; warm-up varies by row/column, measured 10 steps."), std::string::npos) << caption;
}

TEST(ReportCaption, CpuRecordsNameTheCpu) {
  json cpu = record({{"size", 1}}, tflops(1));
  cpu["env"] = {{"device", "cpu"}, {"gpu", ""}, {"cpu", "AMD EPYC 7B13"}, {"libtorch", "2.11.0"}};
  const std::string caption = build_table(table("{name: t, rows: [size], columns: [{metric: tflops}]}"), stored({cpu})).caption;
  EXPECT_EQ(caption, "Setup: AMD EPYC 7B13 (cpu), LibTorch 2.11.0.");
}

TEST(ReportCaption, PivotCaptionSaysWhatTheCellsHold) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, time_ms(1, 0))};
  const std::string caption = build_table(
      table("{name: t, rows: [size], pivot: dtype, metric: time_ms, show_std: true}"), records).caption;
  EXPECT_EQ(caption.rfind("Cells: time_ms mean ± std (ms) by dtype. Setup: ", 0), 0u) << caption;
}

// ---- markdown file ----------------------------------------------------------

BuiltTable small_table(const std::string& name, double value) {
  return build_table(table("{name: " + name + ", title: T, rows: [size], pivot: dtype, metric: tflops}"),
                     stored({record({{"size", 1}, {"dtype", "a"}}, tflops(value))}));
}

TEST(ReportMarkdown, NewFileStartsWithTitleAndNote) {
  const std::string markdown = merge_markdown("", "Device ceilings", {small_table("t", 1)});
  EXPECT_EQ(markdown.rfind("# Device ceilings\n\nTables between runner markers are regenerated by "
                           "`runner report`; write prose outside them.\n\n<!-- runner:table t begin -->\n## T\n",
                           0),
            0u)
      << markdown;
  EXPECT_EQ(markdown.substr(markdown.size() - 29), "\n<!-- runner:table t end -->\n");
}

TEST(ReportMarkdown, ProseOutsideMarkersSurvivesRegeneration) {
  TempDir dir;
  ReportSpec spec{"r", "R", {table("{name: t, title: T, rows: [size], pivot: dtype, metric: tflops}")}};
  write_report(spec, stored({record({{"size", 1}, {"dtype", "a"}}, tflops(1))}), dir.path);
  const std::string first = read_file(dir.path / "r" / "r.md");
  const std::string begin = "<!-- runner:table t begin -->", end = "<!-- runner:table t end -->";
  // Authors write before, right after the end marker, and at the end without a newline.
  std::string edited = first;
  edited.insert(edited.find(begin), "Intro *prose* with | pipes.\n\n");
  edited.insert(edited.find(end) + end.size(), "\nRight after the table.");
  edited += "\n## Discussion\n\nThe end, no newline";
  write_file(dir.path / "r" / "r.md", edited);

  write_report(spec, stored({record({{"size", 1}, {"dtype", "a"}}, tflops(9))}), dir.path);
  std::string expected = edited;
  const std::size_t old_body = expected.find("| 1 | 1 |");
  expected.replace(old_body, 9, "| 1 | 9 |");
  EXPECT_EQ(read_file(dir.path / "r" / "r.md"), expected);
}

TEST(ReportMarkdown, TablesWithoutMarkersAreAppended) {
  const std::string existing = "# Mine\n\nProse.";
  const std::string markdown = merge_markdown(existing, "ignored", {small_table("t", 1)});
  EXPECT_EQ(markdown, "# Mine\n\nProse.\n\n<!-- runner:table t begin -->\n" + to_markdown(small_table("t", 1)) +
                          "<!-- runner:table t end -->\n");
}

TEST(ReportMarkdown, BeginMarkerWithoutEndIsAnError) {
  EXPECT_THROW(merge_markdown("x\n<!-- runner:table t begin -->\nprose\n", "T", {small_table("t", 1)}),
               std::runtime_error);
}

TEST(ReportMarkdown, PipeInACellIsEscaped) {
  BuiltTable built = small_table("t", 1);
  built.cells[0][1] = "a|b";
  EXPECT_NE(to_markdown(built).find("| 1 | a\\|b |\n"), std::string::npos);
}

// ---- latex and csv ----------------------------------------------------------

TEST(ReportLatex, EscapesEverySpecialCharacter) {
  EXPECT_EQ(latex_escape(R"(\ & % $ # _ { } ~ ^ < > |)"),
            R"(\textbackslash{} \& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} )"
            R"(\textless{} \textgreater{} \textbar{})");
  EXPECT_EQ(latex_escape("1.2 ± 0.1, 2.0×, –, —, µs"), "1.2 $\\pm$ 0.1, 2.0$\\times$, --, ---, µs");
}

TEST(ReportLatex, CellsHeaderAndCaptionAreEscaped) {
  BuiltTable built = small_table("t", 1);
  built.header[0] = "model_size";
  built.caption = "50% of peak";
  const std::string latex = to_latex(built, "r");
  EXPECT_NE(latex.find("\\caption{T. 50\\% of peak}\n\\label{tab:r:t}\n"), std::string::npos) << latex;
  EXPECT_NE(latex.find("model\\_size & a \\\\\n"), std::string::npos) << latex;
}

TEST(ReportCsv, QuotesFieldsPerRfc4180) {
  BuiltTable built;
  built.csv_header = {"plain", "with,comma", "say \"hi\""};
  built.csv_rows = {{"a b", "line\nbreak", "–"}};
  EXPECT_EQ(to_csv(built), "plain,\"with,comma\",\"say \"\"hi\"\"\"\na b,\"line\nbreak\",–\n");
}

TEST(ReportCsv, NumbersKeepFullPrecision) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, tflops(330.123456789)),
                                     record({{"size", 1}, {"dtype", "b"}}, tflops(0.1 + 0.2))};
  const BuiltTable built =
      build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops, format: '%.1f'}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "330.1", "0.3"}}));
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "330.123456789", "0.30000000000000004"}}));
}

// ---- spec and results -------------------------------------------------------

TEST(ReportSpec, UnknownTableKeyNamesTheClosestValidKey) {
  const std::string yaml =
      "report:\n"
      "  id: x\n"
      "  tables:\n"
      "    - name: t\n"
      "      rows: [size]\n"
      "      colums: []\n";
  EXPECT_EQ(spec_error(yaml), "experiments/x.yaml:6:7: report.tables[0].colums: unknown key; did you mean 'columns'?");
}

TEST(ReportSpec, UnknownColumnKeyNamesTheClosestValidKey) {
  const std::string yaml = "report: {id: x, tables: [{name: t, rows: [a], columns: [{metric: m, shwo_std: true}]}]}";
  EXPECT_EQ(spec_error(yaml),
            "experiments/x.yaml:1:69: report.tables[0].columns[0].shwo_std: unknown key; did you mean 'show_std'?");
}

TEST(ReportSpec, RatioMustNameAMetricColumnId) {
  const std::string yaml =
      "report: {id: x, tables: [{name: t, rows: [a], columns: [{id: fwd, metric: m}, {ratio: [fwd, fdw]}]}]}";
  EXPECT_NE(spec_error(yaml).find("'fdw' is not the id of a metric column; did you mean 'fwd'?"), std::string::npos)
      << spec_error(yaml);
}

TEST(ReportSpec, ColumnsAndPivotAreExclusive) {
  const std::string yaml = "report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m, columns: [{metric: m}]}]}";
  EXPECT_NE(spec_error(yaml).find("either columns or pivot"), std::string::npos) << spec_error(yaml);
}

TEST(ReportSpec, FormatNeedsExactlyOneNumberConversion) {
  EXPECT_NE(spec_error("report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m, format: '%s'}]}")
                .find("report.tables[0].format: format '%s' needs"),
            std::string::npos);
  EXPECT_NE(spec_error("report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m, format: '%f %f'}]}")
                .find("exactly one"),
            std::string::npos);
  EXPECT_EQ(format_number(42, "%.1f%%"), "42.0%");
  EXPECT_EQ(format_number(41.6, "%d ms"), "42 ms");
}

TEST(ReportSpec, MissingReportSectionIsAnError) {
  EXPECT_EQ(spec_error("title: no report here"), "experiments/x.yaml: report: expected a mapping");
}

TEST(ReportSpec, DuplicateTableNamesAreRejected) {
  const std::string yaml = "report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m},"
                           " {name: t, rows: [a], pivot: p, metric: m}]}";
  EXPECT_NE(spec_error(yaml).find("report.tables[1].name: duplicate table name"), std::string::npos)
      << spec_error(yaml);
}

TEST(ReportResults, BlankLinesAreSkipped) {
  TempDir dir;
  write_file(dir.path / "results.jsonl", "{\"a\":1}\n\n  \n{\"a\":2}\n");
  EXPECT_EQ(read_results(dir.path / "results.jsonl").size(), 2u);
}

TEST(ReportResults, MalformedLineNamesItsLineNumber) {
  TempDir dir;
  write_file(dir.path / "results.jsonl", "{\"a\":1}\n\n{\"a\":\n{\"a\":2}\n");
  try {
    read_results(dir.path / "results.jsonl");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("results.jsonl:3: malformed JSON"), std::string::npos) << e.what();
  }
}


// ---- noise ------------------------------------------------------------------

json step_ms(double mean, double std, int n, double rel_stderr = -1) {
  json m = {{"unit", "ms"}, {"n", n}, {"mean", mean}, {"std", std}, {"median", mean}, {"min", mean}, {"max", mean}};
  if (rel_stderr >= 0) m["rel_stderr"] = rel_stderr;
  return {{"step_ms", m}};
}

TEST(ReportNoise, MarkerFlagsCellsNoisierThanTheDefaultThresholdAndExplainsIt) {
  // 1/sqrt(10)/5 = 6.3% > 5%; 0.1/sqrt(10)/5 = 0.6%.
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, step_ms(5, 1, 10)),
                                     record({{"size", 1}, {"dtype", "b"}}, step_ms(5, 0.1, 10))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: step_ms}"), records);
  EXPECT_EQ(built.cells, (Rows{{"1", "5 †", "5"}}));
  EXPECT_NE(built.caption.find("† noisy: relative standard error of the mean above"), std::string::npos)
      << built.caption;
  EXPECT_NE(built.caption.find("5%"), std::string::npos) << built.caption;
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "5", "5"}}));  // CSV keeps plain numbers
}

TEST(ReportNoise, TheRecordsOwnTargetWinsOverTheTableThreshold) {
  json adaptive = record({{"size", 1}}, step_ms(5, 0.1, 10, 0.02));
  adaptive["measurement"] = {{"mode", "adaptive"}, {"target_rel_stderr", 0.01}};
  const BuiltTable built = build_table(table("{name: t, rows: [size], columns: [{metric: step_ms}]}"), stored({adaptive}));
  EXPECT_EQ(built.cells, (Rows{{"1", "5 †"}}));  // stored rel_stderr 2% > its 1% target
}

TEST(ReportNoise, PercentShowsEveryCellsNoiseAndAddsACsvColumn) {
  const std::vector<json> records = {record({{"size", 1}}, step_ms(10, 0.5, 25))};  // 0.5/5/10 = 1%
  const BuiltTable built = build_table(
      table("{name: t, rows: [size], columns: [{header: T, metric: step_ms, format: '%.1f', noise: percent}]}"),
      records);
  EXPECT_EQ(built.cells, (Rows{{"1", "10.0 ±1%"}}));
  EXPECT_EQ(built.csv_header, (std::vector<std::string>{"size", "T", "T rel_stderr"}));
  EXPECT_EQ(built.csv_rows, (Rows{{"1", "10", "0.01"}}));
  EXPECT_NE(built.caption.find("±x% after a value"), std::string::npos) << built.caption;
}

TEST(ReportNoise, RatioNoiseAddsBothSidesInQuadrature) {
  const std::vector<json> records = {record({{"size", 1}, {"side", "a"}}, step_ms(20, 0, 10, 0.03)),
                                     record({{"size", 1}, {"side", "b"}}, step_ms(10, 0, 10, 0.04))};
  const BuiltTable built = build_table(table("{name: t, rows: [size], noise: percent, columns: ["
                                             "{id: a, metric: step_ms, where: {side: a}, noise: off},"
                                             "{id: b, metric: step_ms, where: {side: b}, noise: off},"
                                             "{header: r, ratio: [a, b], format: '%.2f'}]}"),
                                       records);
  // hypot(3%, 4%) = 5%, under the combined threshold hypot(5%, 5%) = 7.1%: no marker.
  EXPECT_EQ(built.cells, (Rows{{"1", "20", "10", "2.00 ±5%"}}));
}

TEST(ReportNoise, OffShowsNothingAndScalarsHaveNoNoise) {
  const std::vector<json> records = {record({{"size", 1}, {"dtype", "a"}}, step_ms(5, 1, 10)),
                                     record({{"size", 1}, {"dtype", "b"}}, tflops(3))};
  EXPECT_EQ(build_table(table("{name: t, rows: [size], pivot: dtype, metric: step_ms, noise: off}"), records).cells,
            (Rows{{"1", "5", "–"}}));
  EXPECT_EQ(build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops, noise: percent}"), records).cells,
            (Rows{{"1", "–", "3"}}));
}

TEST(ReportSpec, UnknownNoiseModeAndBadThresholdAreRejected) {
  EXPECT_NE(spec_error("report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m, noise: loud}]}")
                .find("unknown noise mode 'loud'"),
            std::string::npos);
  EXPECT_NE(spec_error("report: {id: x, tables: [{name: t, rows: [a], pivot: p, metric: m, noise_threshold: -1}]}")
                .find("noise_threshold: expected a positive number"),
            std::string::npos);
}

TEST(ReportTable, SkippedPointsShowSkipped) {
  json skipped = record({{"size", 1}, {"dtype", "a"}}, json::object(), "skipped");
  const BuiltTable built = build_table(table("{name: t, rows: [size], pivot: dtype, metric: tflops}"), stored({skipped}));
  EXPECT_EQ(built.cells, (Rows{{"1", "skipped"}}));
}

TEST(ReportCaption, AdaptiveRunsSayTheTargetAndTheRangeOfN) {
  std::vector<json> records;
  for (int n : {12, 40}) {
    json r = record({{"size", n}, {"measure.target_rel_stderr", 0.01}, {"measure.cache", "cold"}}, step_ms(5, 0.01, n));
    r["measurement"] = {{"mode", "adaptive"}, {"n", n}, {"target_rel_stderr", 0.01}};
    records.push_back(r);
  }
  const std::string caption = build_table(table("{name: t, rows: [size], columns: [{metric: step_ms}]}"), records).caption;
  EXPECT_NE(caption.find("measured until the relative standard error of the mean is at most 1% (n = 12–40 steps)"),
            std::string::npos) << caption;
  EXPECT_NE(caption.find("cache flushed before every step"), std::string::npos) << caption;
}

}  // namespace
}  // namespace runner::report
