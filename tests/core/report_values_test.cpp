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

TEST(ReportValues, SpecMistakesNameTheValue) {
  const auto error = [](const std::string& expr) {
    const ReportSpec s = spec("{id: r, tables: [{name: step, rows: [ddp], columns: [{header: step, metric: step_ms}]}], "
                              "values: [{name: v, expr: '" + expr + "'}]}");
    try {
      compute_values(s, tables_of(s, records()));
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("cell(\"stpe\", \"none\", \"step\")").find("report r: value 'v': expr"), std::string::npos);
  EXPECT_NE(error("cell(\"stpe\", \"none\", \"step\")").find("no table 'stpe'"), std::string::npos);
  EXPECT_NE(error("cell(\"step\", \"none\", \"time\")").find("no column 'time'"), std::string::npos);
  EXPECT_NE(error("later + 1").find("'later' is no value declared above it"), std::string::npos);
  EXPECT_NE(error("exp(1)").find("unknown function 'exp'"), std::string::npos);
  EXPECT_NE(error("1 +").find("expected a number"), std::string::npos);
  EXPECT_NE(error("(1").find("expected ')'"), std::string::npos);
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

}  // namespace
}  // namespace runner::report
