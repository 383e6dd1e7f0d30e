// Values quoted in a report's prose, rendered from its tables; captions' model dimensions
// and questions.
#include <gtest/gtest.h>

#include <cmath>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner::report {
namespace {

using nlohmann::json;

json record(const json& params, const json& metrics) {
  return {{"experiment", "x"}, {"part", "main"},  {"point", 0},          {"status", "ok"},
          {"params", params},  {"labels", json::object()}, {"metrics", metrics},
          {"env", {{"device", "cpu"}, {"cpu", "test"}, {"libtorch", "2.11.0"}}}};
}
json ms(double v) { return {{"step_ms", {{"unit", "ms"}, {"value", v}}}}; }

ReportSpec spec(const std::string& yaml) { return parse_report_spec(YAML::Load(yaml), "test.yaml"); }

const char* kSpec =
    "{id: r, tables: [{name: step, rows: [ddp], columns: [{header: step, metric: step_ms, format: '%.1f'}]}], "
    "values: [{name: ratio, expr: 'cell(\"step\", \"naive\", \"step\") / cell(\"step\", \"none\", \"step\")', "
    "format: '%.3f'}, {name: extra, expr: 'cell(\"step\", \"naive\", \"step\") - cell(\"step\", \"none\", \"step\")'}, "
    "{name: both, expr: 'sum(\"step\", \"step\")', format: '%.0f'}, {name: line, expr: 'slope(\"step\", \"step\", \"step\")'}, "
    "{name: power, expr: '-(2 ^ 3) + sqrt(16) * max(1, ratio)', format: '%.2f'}]}";

std::vector<json> records() { return {record({{"ddp", "none"}}, ms(400)), record({{"ddp", "naive"}}, ms(441))}; }

std::vector<BuiltTable> tables_of(const ReportSpec& s, const std::vector<json>& recs) {
  std::vector<BuiltTable> out;
  for (const auto& t : s.tables) out.push_back(build_table(t, recs));
  return out;
}

TEST(ReportValues, ComputedFromTheTablesAtFullPrecision) {
  const ReportSpec s = spec(kSpec);
  const auto values = compute_values(s, tables_of(s, records()));
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0].text, "1.103");  // 441 / 400 = 1.1025, from the cells, not their "%.1f" text
  EXPECT_EQ(values[1].text, "41");
  EXPECT_EQ(values[2].text, "841");
  EXPECT_EQ(values[3].text, "1");
  EXPECT_EQ(values[4].text, "-3.59");  // earlier values by name
}

TEST(ReportValues, AMissingRowRendersADashLikeATableCell) {
  const ReportSpec s = spec(kSpec);
  const auto values = compute_values(s, tables_of(s, {record({{"ddp", "none"}}, ms(400))}));
  EXPECT_EQ(values[0].text, "–");
  EXPECT_TRUE(std::isnan(values[0].value));
}

TEST(ReportValues, APivotColumnTheRecordsLackIsMissingNotMisnamed) {
  // A pivot table's columns come from its records: a smoke run that sweeps another attention
  // has no `naive` column, so a value over it renders a dash instead of failing the run.
  const ReportSpec s = spec("{id: r, tables: [{name: t, rows: [ddp], pivot: impl, metric: step_ms}], "
                            "values: [{name: v, expr: 'cell(\"t\", \"none\", \"naive\")'}]}");
  EXPECT_EQ(compute_values(s, tables_of(s, {}))[0].text, "–");
  EXPECT_EQ(compute_values(s, tables_of(s, {record({{"ddp", "none"}, {"impl", "sdpa"}}, ms(1))}))[0].text, "–");
  EXPECT_EQ(compute_values(s, tables_of(s, {record({{"ddp", "none"}, {"impl", "naive"}}, ms(2))}))[0].text, "2");
}

// The message a spec (parse, before any run) or a render throws; "(no error)" if none.
std::string error_of(const std::string& yaml, const std::vector<json>& recs = records(), bool all_points = true) {
  try {
    const ReportSpec s = spec(yaml);
    compute_values(s, tables_of(s, recs), all_points);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReportValues, SpecMistakesAreFoundBeforeARunAndNameTheValue) {
  const auto error = [](const std::string& expr) {
    return error_of("{id: r, tables: [{name: step, rows: [ddp], columns: [{header: step, metric: step_ms}]}], "
                    "values: [{name: v, expr: '" + expr + "'}]}");
  };
  // Found by parsing alone (no records): file, line, key and what to fix.
  EXPECT_NE(error("cell(\"stpe\", \"none\", \"step\")").find("test.yaml:1:"), std::string::npos);
  EXPECT_NE(error("cell(\"stpe\", \"none\", \"step\")").find("report.values[0].expr: expr"), std::string::npos);
  EXPECT_NE(error("cell(\"stpe\", \"none\", \"step\")").find("no table 'stpe' in this report; did you mean 'step'?"),
            std::string::npos);
  // A columns: table's headers are known before its records.
  EXPECT_NE(error("cell(\"step\", \"none\", \"stpe\")").find("no column 'stpe'; did you mean 'step'?"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", \"time\")").find("no column 'time'"), std::string::npos);
  EXPECT_NE(error("later + 1").find("'later' is no value declared above it"), std::string::npos);
  EXPECT_NE(error("exp(1)").find("unknown function 'exp'"), std::string::npos);
  EXPECT_NE(error("colum_max(1)").find("did you mean 'column_max'?"), std::string::npos);
  EXPECT_NE(error("1 +").find("expected a number"), std::string::npos);
  EXPECT_NE(error("(1").find("expected ')'"), std::string::npos);
  EXPECT_NE(error("max()").find("expected a number"), std::string::npos);
  EXPECT_NE(error("column_max(\"step\")").find("column_max(\"table\", \"column\", \"key=value\"...)"),
            std::string::npos);
  // Filters: a row key of the table, an operator, a value (a number for < <= > >=).
  EXPECT_NE(error("column_max(\"step\", \"step\", \"dp=none\")")
                .find("filter \"dp=none\": table 'step' has no row key 'dp'; did you mean 'ddp'?"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", \"step\", \"ddp\")").find("expected key=value"), std::string::npos);
  EXPECT_NE(error("column_max(\"step\", \"step\", \"ddp=\")").find("no value after '='"), std::string::npos);
  EXPECT_NE(error("column_max(\"step\", \"step\", \"ddp<=1o24\")").find("'1o24' is no number"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", \"step\", \"ddp!none\")").find("write key!=value"), std::string::npos);
  EXPECT_EQ(error("column_max(\"step\", \"step\", \"ddp = none | naive\")"), "(no error)");
}

// rows [size, precision]: step_ms by size and precision; `fast` only where recorded.
const char* kGrid =
    "{id: g, tables: [{name: step, rows: [model.size, precision], columns: ["
    "{id: eager, header: eager, metric: step_ms, where: {impl: eager}}, "
    "{id: fast, header: fast, metric: step_ms, where: {impl: fast}}, "
    "{header: fast / eager, ratio: [fast, eager]}]}], values: [";
json grid_record(const std::string& size, const std::string& precision, const std::string& impl, double v) {
  return record({{"model.size", size}, {"precision", precision}, {"impl", impl}}, ms(v));
}
std::vector<json> grid() {
  std::vector<json> out;
  double v = 10;
  for (const char* size : {"small", "medium", "large"})
    for (const char* precision : {"fp32", "bf16"}) {
      out.push_back(grid_record(size, precision, "eager", v));
      out.push_back(grid_record(size, precision, "fast", v / 2 + (precision[0] == 'b' ? 1 : 0)));
      v *= 2;
    }
  return out;  // eager: small 10/20, medium 40/80, large 160/320 (fp32/bf16); fast = eager/2, +1 on bf16
}
std::string grid_value(const std::string& expr, const std::vector<json>& recs = grid(), bool all_points = true) {
  const ReportSpec s = spec(std::string(kGrid) + "{name: v, expr: '" + expr + "', format: '%.4g'}]}");
  return compute_values(s, tables_of(s, recs), all_points).at(0).text;
}

TEST(ReportValues, ColumnAggregatesOverTheRowsAFilterOnRowKeysKeeps) {
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\")"), "320");
  EXPECT_EQ(grid_value("column_min(\"step\", \"eager\")"), "10");
  EXPECT_EQ(grid_value("column_mean(\"step\", \"eager\")"), "105");  // 630 / 6
  // One condition: a row key equal to one of '|'-separated values (the text the row shows).
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\", \"precision=fp32\")"), "160");
  EXPECT_EQ(grid_value("column_min(\"step\", \"eager\", \"precision=bf16\")"), "20");
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\", \"model.size=small|medium\")"), "80");
  EXPECT_EQ(grid_value("column_min(\"step\", \"eager\", \"model.size!=small\")"), "40");
  // Several conditions: all of them.
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\", \"precision=fp32\", \"model.size!=large\")"), "40");
  // Ratio columns, as the table computes them (fast / eager: bf16 rows 0.55, 0.5125, 0.503125).
  EXPECT_EQ(grid_value("column_max(\"step\", \"fast / eager\", \"precision=bf16\")"), "0.55");
  EXPECT_EQ(grid_value("column_min(\"step\", \"fast / eager\", \"precision=bf16\")"), "0.5031");
  // Exact text: "bf" is not "bf16".
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\", \"precision=bf\")", grid(), false), "–");
}

TEST(ReportValues, ColumnAggregatesTakeAnExpressionOfTheRowsCells) {
  // A quoted header in the column stands for that row's cell: the same as the ratio column.
  EXPECT_EQ(grid_value("column_max(\"step\", \"fast\" / \"eager\", \"precision=bf16\")"), "0.55");
  EXPECT_EQ(grid_value("column_min(\"step\", \"fast\" / \"eager\", \"precision=bf16\")"), "0.5031");
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\" - \"fast\")"), "159");  // large bf16: 320 - 161
  // The spread of a row's cells (eager / fast on bf16: 20/11, 80/41, 320/161), and arithmetic.
  EXPECT_EQ(grid_value("column_min(\"step\", max(\"fast\", \"eager\") / min(\"fast\", \"eager\"), "
                       "\"precision=bf16\")"),
            "1.818");
  EXPECT_EQ(grid_value("column_mean(\"step\", \"eager\" / 10)"), "10.5");
  // A dash in any cell a kept row reads makes the value a dash.
  std::vector<json> recs = grid();
  recs.erase(recs.begin() + 3);  // no small bf16 fast record
  EXPECT_EQ(grid_value("column_min(\"step\", \"eager\" / \"fast\", \"precision=bf16\")", recs), "–");
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\" / \"fast\", \"model.size!=small\")", recs), "2");
  // A misnamed header is found before a run; a quoted header outside an aggregate is refused.
  const auto error = [](const std::string& expr) {
    return error_of(std::string(kGrid) + "{name: v, expr: '" + expr + "'}]}", grid());
  };
  EXPECT_NE(error("column_max(\"step\", \"fast\" / \"eagre\")").find("table 'step' has no column 'eagre'"),
            std::string::npos);
  EXPECT_NE(error("1 + \"fast\"").find("stands for a column only in the column of column_min"), std::string::npos);
}

TEST(ReportValues, PeerReadsTheRowThatDiffersInTheNamedKeys) {
  // fast: small 5/11, medium 20/41, large 80/161 (fp32/bf16).
  EXPECT_EQ(grid_value("column_max(\"step\", \"fast\" / peer(\"fast\", \"precision=fp32\"), \"precision=bf16\")"),
            "2.2");
  EXPECT_EQ(grid_value("column_min(\"step\", peer(\"fast\", \"model.size=medium\") / \"fast\", "
                       "\"model.size=small\")"),
            "3.727");
  // Two keys named; an expression of the twin's cells.
  EXPECT_EQ(grid_value("column_max(\"step\", peer(\"eager\" + \"fast\", \"model.size=large\", \"precision=fp32\") / "
                       "\"eager\", \"model.size=small\", \"precision=bf16\")"),
            "12");  // (160 + 80) / 20
  // No twin row: a dash where points are missing, else a mistake that names the row.
  std::vector<json> recs = grid();
  recs.erase(recs.begin() + 8, recs.begin() + 10);  // no large fp32 records
  const std::string no_twin = "column_max(\"step\", \"eager\" / peer(\"eager\", \"precision=fp32\"))";
  EXPECT_EQ(grid_value(no_twin, recs, false), "–");
  const auto error = [](const std::string& expr, const std::vector<json>& r = grid()) {
    return error_of(std::string(kGrid) + "{name: v, expr: '" + expr + "'}]}", r);
  };
  EXPECT_NE(error(no_twin, recs).find("table 'step' has no row like \"large, bf16\" with precision=fp32"),
            std::string::npos);
  EXPECT_NE(error("peer(\"eager\", \"precision=fp32\")").find("belongs in the column of column_min"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", peer(\"eager\", \"precision!=fp32\"))").find("names one value of a row key"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", peer(\"eager\"))").find("differs from the row in at least one key"),
            std::string::npos);
  EXPECT_NE(error("column_max(\"step\", peer(\"eager\", \"dtype=fp32\"))").find("has no row key 'dtype'"),
            std::string::npos);
}

TEST(ReportValues, NumericFiltersCompareRowKeysAsNumbers) {
  std::vector<json> recs;
  for (int seq : {128, 256, 1024, 4096}) recs.push_back(record({{"seq", seq}}, ms(seq / 8.0)));
  const auto value = [&](const std::string& expr) {
    const ReportSpec s = spec("{id: r, tables: [{name: t, rows: [seq], columns: [{header: ms, metric: step_ms}]}], "
                              "values: [{name: v, expr: '" + expr + "'}]}");
    return compute_values(s, tables_of(s, recs)).at(0).text;
  };
  EXPECT_EQ(value("column_max(\"t\", \"ms\", \"seq<=1024\")"), "128");
  EXPECT_EQ(value("column_max(\"t\", \"ms\", \"seq<1024\")"), "32");
  EXPECT_EQ(value("column_min(\"t\", \"ms\", \"seq>128\")"), "32");
  EXPECT_EQ(value("column_min(\"t\", \"ms\", \"seq >= 1024\")"), "128");
  EXPECT_EQ(value("column_min(\"t\", \"ms\", \"seq>=1e3\", \"seq<4096\")"), "128");
  // A row key that is no number cannot be compared as one.
  EXPECT_NE(error_of(std::string(kGrid) + "{name: v, expr: 'column_max(\"step\", \"eager\", \"model.size<2\")'}]}",
                     grid())
                .find("row key model.size of table 'step' is 'small', no number; compare it with = or !="),
            std::string::npos);
}

TEST(ReportValues, AnEmptyCellAmongTheKeptRowsRendersADashNeverAZero) {
  std::vector<json> recs = grid();
  recs.erase(recs.begin() + 3);  // small bf16 has no fast record: its fast and fast / eager cells are "–"
  EXPECT_EQ(grid_value("column_max(\"step\", \"fast\")", recs), "–");
  EXPECT_EQ(grid_value("column_min(\"step\", \"fast / eager\", \"precision=bf16\")", recs), "–");
  EXPECT_EQ(grid_value("column_mean(\"step\", \"fast\", \"precision=bf16\")", recs), "–");
  // A filter that leaves the empty row out reads the rest.
  EXPECT_EQ(grid_value("column_max(\"step\", \"fast\", \"precision=fp32\")", recs), "80");
  EXPECT_EQ(grid_value("column_min(\"step\", \"fast\", \"precision=bf16\", \"model.size!=small\")", recs), "41");
  // min and max: any number of arguments; one dash makes the result a dash, wherever it stands.
  EXPECT_EQ(grid_value("max(3, 9, 4, 1)"), "9");
  EXPECT_EQ(grid_value("min(3, 9, 4, 1)"), "1");
  EXPECT_EQ(grid_value("max(7)"), "7");
  EXPECT_EQ(grid_value("max(1, column_max(\"step\", \"fast\"))", recs), "–");
  EXPECT_EQ(grid_value("min(column_max(\"step\", \"fast\"), 1)", recs), "–");
}

TEST(ReportValues, AFilterThatKeepsNoRowIsAMistakeUnlessPointsAreMissing) {
  const std::string yaml =
      std::string(kGrid) + "{name: short, expr: 'column_max(\"step\", \"eager\", \"precision=bf61\")'}]}";
  const std::string error = error_of(yaml, grid());
  EXPECT_NE(error.find("report g: value 'short': "), std::string::npos) << error;
  EXPECT_NE(error.find("no row of table 'step' matches \"precision=bf61\" (precision is one of fp32, bf16); "
                       "fix the filter"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  // Without a filter: a table with no rows.
  EXPECT_NE(error_of(std::string(kGrid) + "{name: v, expr: 'column_min(\"step\", \"eager\")'}]}", {})
                .find("table 'step' has no rows"),
            std::string::npos);
  // A smoke or partial run may lack those rows: the value renders a dash.
  EXPECT_EQ(error_of(yaml, grid(), false), "(no error)");
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\", \"precision=bf61\")", grid(), false), "–");
  EXPECT_EQ(grid_value("column_max(\"step\", \"eager\")", {}, false), "–");
}

TEST(ReportValues, ASmokeOrPartialRunRendersADashWhereAFilterKeepsNoRow) {
  const auto dir = testing::fresh_dir("values-smoke");
  std::filesystem::create_directories(dir / "g");
  testing::write_file(dir / "g" / "g.md", "# G\n\nAt most {{value v}} ms.\n");
  const ReportSpec s = spec(std::string(kGrid) + "{name: v, expr: 'column_max(\"step\", \"eager\", \"precision=bf16\")'}]}");
  const std::vector<json> fp32_only = {grid_record("small", "fp32", "eager", 10)};
  EXPECT_THROW(write_report(s, stored(fp32_only), dir), SpecError);
  RunSummary smoke;
  smoke.smoke = true;
  write_report(s, stored(fp32_only), dir, smoke);
  EXPECT_NE(testing::read_file(dir / "g" / "g.md").find("At most <!-- runner:value v -->–<!-- runner:value end --> ms."),
            std::string::npos);
  RunSummary partial;
  partial.planned_points = 2;
  EXPECT_NO_THROW(write_report(s, stored(fp32_only), dir, partial));
}

TEST(ReportValues, SpecChecksNamesAndFormats) {
  const auto error = [](const std::string& values) {
    try {
      spec("{id: r, tables: [{name: t, rows: [a], metric: m, pivot: b}], values: " + values + "}");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("[{name: v, expr: '1', format: '%s'}]").find("report.values[0].format"), std::string::npos);
  EXPECT_NE(error("[{name: v, expr: '1'}, {name: v, expr: '2'}]").find("duplicate value name"), std::string::npos);
  EXPECT_NE(error("[{name: v}]").find("report.values[0].expr: missing"), std::string::npos);
  EXPECT_NE(error("[{name: v, exp: '1'}]").find("unknown key"), std::string::npos);
}

TEST(ReportValues, MarkdownTemplatesBecomeMarkedValuesAndReRender) {
  const std::vector<RenderedValue> values = {{"ratio", 1.1025, "1.103"}};
  const std::string first = merge_values("x is {{value ratio}}× y.\n", "r", values);
  EXPECT_EQ(first, "x is <!-- runner:value ratio -->1.103<!-- runner:value end -->× y.\n");
  const std::string again = merge_values(first, "r", {{"ratio", 1.2, "1.200"}});
  EXPECT_EQ(again, "x is <!-- runner:value ratio -->1.200<!-- runner:value end -->× y.\n");
  EXPECT_THROW(merge_values("{{value nope}}", "r", values), SpecError);
  EXPECT_EQ(values_latex("r", values).substr(values_latex("r", values).find('\n') + 1),
            "\\runnervalue{r.ratio}{1.103}\n");
}

TEST(ReportValues, WriteReportRendersValuesIntoMarkdownAndLatex) {
  const auto dir = testing::fresh_dir("values");
  std::filesystem::create_directories(dir / "r");
  testing::write_file(dir / "r" / "r.md", "# R\n\nNaive costs {{value ratio}}× one GPU.\n");
  const ReportSpec s = spec(kSpec);
  write_report(s, records(), dir);
  const std::string md = testing::read_file(dir / "r" / "r.md");
  EXPECT_NE(md.find("Naive costs <!-- runner:value ratio -->1.103<!-- runner:value end -->× one GPU."),
            std::string::npos) << md;
  EXPECT_NE(testing::read_file(dir / "r" / "r.values.tex").find("\\runnervalue{r.extra}{41}"), std::string::npos);
}

TEST(ReportCaption, ModelDimsResolvedFromTheSizeAndQuestionFromTheReport) {
  const json params = {{"model", "transformer_lm"}, {"model.size", "xl"}, {"model.d_model", 0},
                       {"model.d_ff", 0}, {"model.num_layers", 0}, {"model.num_heads", 0},
                       {"model.rope_theta", 10000.0}, {"optimizer", "adamw"}, {"optimizer.beta1", 0.9},
                       {"memory_breakdown", false}, {"batch_size", 8}, {"ddp", "none"}};
  const auto dir = testing::fresh_dir("caption");
  const ReportSpec s = spec("{id: my_question, tables: [{name: step, rows: [ddp], columns: [{metric: step_ms}]}]}");
  write_report(s, stored({record(params, ms(1))}), dir);
  const std::string md = testing::read_file(dir / "my_question" / "my_question.md");
  EXPECT_NE(md.find("fixed: batch_size=8, model=transformer_lm, model.size=xl, optimizer=adamw, "
                    "model: d_model 1600, d_ff 6400, 48 layers, 25 heads. Question: my_question."),
            std::string::npos) << md;
  EXPECT_EQ(md.find("d_model=0"), std::string::npos);
  EXPECT_EQ(md.find("beta1"), std::string::npos);
  EXPECT_EQ(md.find("memory_breakdown"), std::string::npos);
}

TEST(ReportLatex, ASharedTableCanBeSkippedByTheDocument) {
  const ReportSpec s = spec(kSpec);
  const std::string latex = to_latex(tables_of(s, records()).at(0), "r");
  EXPECT_EQ(latex.rfind("\\ifcsname runnerskip@r:step\\endcsname\\else\n\\begin{table}", 0), 0u) << latex;
  EXPECT_NE(latex.find("\\end{table}\n\\fi\n"), std::string::npos) << latex;
}


// A stats metric (mean, sd, n, and the samples when kept), from run `run` of a merged report.
json stats_record(const std::string& impl, double mean, double sd, int n, const std::string& run,
                  const std::vector<double>& samples = {}) {
  json metric = {{"unit", "ms"}, {"n", n}, {"mean", mean}, {"std", sd}, {"median", mean}, {"min", mean}, {"max", mean}};
  if (!samples.empty()) metric["samples"] = samples;
  json r = record({{"impl", impl}}, {{"step_ms", metric}});
  if (!run.empty()) r["source_run_name"] = run;
  return r;
}
// The value's text, or the message of the mistake.
std::string stats_value(const std::string& expr, const std::vector<json>& recs, const std::string& format = "%.4g") {
  try {
    const ReportSpec s = spec("{id: s, tables: [{name: t, rows: [impl], columns: [{header: step, metric: step_ms}, "
                              "{header: fixed, metric: fixed_ms}]}], values: [{name: v, expr: '" + expr +
                              "', format: '" + format + "'}]}");
    return compute_values(s, tables_of(s, recs)).at(0).text;
  } catch (const SpecError& e) {
    return e.what();
  }
}

TEST(ReportValues, ARangeRendersBothEndsInOrder) {
  EXPECT_EQ(grid_value("range(column_min(\"step\", \"eager\"), column_max(\"step\", \"eager\"))"), "10–320");
  EXPECT_NE(error_of(std::string(kGrid) + "{name: v, expr: 'range(column_max(\"step\", \"eager\"), 1)'}]}", grid())
                .find("the low end 320 is above the high end 1; swap them"),
            std::string::npos);
  // A range is a whole value: its ends are not one number to compute with.
  EXPECT_NE(error_of(std::string(kGrid) + "{name: r, expr: 'range(1, 2)'}, {name: v, expr: 'r * 2'}]}")
                .find("'r' is a range"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGrid) + "{name: v, expr: '1 + range(1, 2)'}]}").find("is a whole value"),
            std::string::npos);
  // Ends that read the same at the value's format render once.
  EXPECT_EQ(grid_value("range(10.01, 10.02)"), "10.01–10.02");
  EXPECT_EQ(grid_value("range(10.001, 10.002)"), "10");
  // One end missing (a partial run): the value is a dash, as a cell would be.
  EXPECT_EQ(grid_value("range(1, cell(\"step\", \"tiny, fp32\", \"eager\"))", grid(), false), "–");
}

TEST(ReportValues, ARatioOfCellsOfTwoRunsIsRefusedUnlessItSaysSo) {
  const std::vector<json> runs = {stats_record("a", 56.5, 1, 10, "x/data"), stats_record("b", 68.3, 1, 10, "x/runs/four"),
                                  stats_record("c", 77.7, 1, 10, "x/data")};
  const std::string ratio = "cell(\"t\", \"b\", \"step\") / cell(\"t\", \"a\", \"step\")";
  EXPECT_NE(stats_value(ratio, runs).find("value 'v': expr '" + ratio + "': combines cells of runs x/data and x/runs/four"),
            std::string::npos);
  EXPECT_EQ(stats_value("across_runs(" + ratio + ")", runs), "1.209 (across runs x/data and x/runs/four)");
  // Within one run: no note. An earlier value carries its runs into a later one.
  EXPECT_EQ(stats_value("cell(\"t\", \"c\", \"step\") / cell(\"t\", \"a\", \"step\")", runs), "1.375");
  EXPECT_NE(stats_value("cell(\"t\", \"b\", \"step\") - column_min(\"t\", \"step\")", runs).find("combines cells"),
            std::string::npos);
  // A range compares nothing: each end may come from its own run.
  EXPECT_EQ(stats_value("range(column_min(\"t\", \"step\"), column_max(\"t\", \"step\"))", runs), "56.5–77.7");
  // A report of one run has no run names at all.
  EXPECT_EQ(stats_value(ratio, {stats_record("a", 56.5, 1, 10, ""), stats_record("b", 68.3, 1, 10, "")}), "1.209");
}

TEST(ReportValues, WelchTFromTheCellsMeanSdAndN) {
  // benchmarking_mixed_precision's medium backward: 56.21 ± 5.59 against 65.16 ± 5.68 ms, n = 10.
  const std::vector<json> recs = {stats_record("bf16", 56.21, 5.59, 10, ""), stats_record("fp32", 65.16, 5.68, 10, "")};
  EXPECT_EQ(stats_value("welch_t(\"t\", \"fp32\", \"step\", \"bf16\", \"step\")", recs, "%.3f"), "3.551");
  EXPECT_EQ(stats_value("abs(welch_t(\"t\", \"bf16\", \"step\", \"fp32\", \"step\"))", recs, "%.3f"), "3.551");
  // A missing cell is a dash; a cell without sd and n (a scalar) is a mistake.
  EXPECT_EQ(stats_value("welch_t(\"t\", \"fp64\", \"step\", \"bf16\", \"step\")", recs), "–");
  json scalar = record({{"impl", "one"}}, {{"step_ms", {{"unit", "ms"}, {"value", 3.0}}}});
  EXPECT_NE(stats_value("welch_t(\"t\", \"one\", \"step\", \"bf16\", \"step\")", {recs[0], scalar})
                .find("welch_t: cell (\"one\", \"step\") of table 't' has no mean, sd and n >= 2"),
            std::string::npos);
  // Two runs: refused like a ratio.
  EXPECT_NE(stats_value("welch_t(\"t\", \"a\", \"step\", \"b\", \"step\")",
                        {stats_record("a", 1, 1, 10, "r1"), stats_record("b", 2, 1, 10, "r2")})
                .find("combines cells of runs r1 and r2"),
            std::string::npos);
}

TEST(ReportValues, MannWhitneyPFromTheCellsSamples) {
  // Fully separated samples of 5 and 5: exact two-sided p = 2 / C(10, 5) = 2 / 252.
  std::vector<json> recs = {stats_record("a", 3, 1.6, 5, "", {1, 2, 3, 4, 5}),
                            stats_record("b", 8, 1.6, 5, "", {6, 7, 8, 9, 10})};
  EXPECT_EQ(stats_value("mann_whitney_p(\"t\", \"a\", \"step\", \"b\", \"step\")", recs, "%.6f"), "0.007937");
  // Interleaved: U = 10 of 25, exact p = 0.6905 (as scipy.stats.mannwhitneyu).
  recs = {stats_record("a", 5, 3, 5, "", {1, 3, 5, 7, 9}), stats_record("b", 6, 3, 5, "", {2, 4, 6, 8, 10})};
  EXPECT_EQ(stats_value("mann_whitney_p(\"t\", \"a\", \"step\", \"b\", \"step\")", recs, "%.4f"), "0.6905");
  // Ties: the normal approximation with tie and continuity corrections (scipy: 0.0394).
  recs = {stats_record("a", 1, 1, 6, "", {1, 1, 2, 2, 3, 3}), stats_record("b", 3, 1, 6, "", {2, 3, 3, 4, 4, 5})};
  EXPECT_EQ(stats_value("mann_whitney_p(\"t\", \"a\", \"step\", \"b\", \"step\")", recs, "%.4f"), "0.0394");
  // Records without samples: use welch_t.
  EXPECT_NE(stats_value("mann_whitney_p(\"t\", \"a\", \"step\", \"b\", \"step\")",
                        {stats_record("a", 1, 1, 10, ""), stats_record("b", 2, 1, 10, "")})
                .find("kept no samples in its record; use welch_t"),
            std::string::npos);
}

}  // namespace
}  // namespace runner::report
