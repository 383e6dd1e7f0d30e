// Figures in report specs: parsing and its one-line errors, the points a figure
// selects from records, the files written with and without matplotlib, the checks
// made before a run, and the LaTeX log check behind `runner report --pdf`.
#include <gtest/gtest.h>

#include <cstdlib>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner::report {
namespace {

using nlohmann::json;
using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

const char* kFigure = "{name: f, x: size, metric: time_ms}";

ReportSpec parse(const std::string& figures_flow) {
  return parse_report_spec(YAML::Load("{id: r, figures: [" + figures_flow + "]}"), "exp.yaml");
}

std::string parse_error(const std::string& report_yaml) {
  try {
    parse_report_spec(YAML::Load(report_yaml), "experiments/x.yaml");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "no error";
}

json record(const std::string& part, const std::string& size, double mean, const json& labels = json::object(),
            const std::string& status = "ok") {
  json r = {{"part", part}, {"point", 0}, {"status", status}, {"params", {{"size", size}, {"impl", "a"}}},
            {"labels", labels}, {"env", {{"device", "cpu"}, {"cpu", "test cpu"}, {"libtorch", "2.11.0"}}}};
  if (status == "ok")
    r["metrics"] = {{"time_ms", {{"unit", "ms"}, {"n", 4}, {"mean", mean}, {"std", 0.5}, {"median", mean + 1},
                                 {"min", mean}, {"max", mean}}}};
  return r;
}

TEST(FigureSpec, ParsesKeysAndDefaults) {
  const ReportSpec spec = parse(
      "{name: bw, kind: bar, x: size, series: [impl, part], panel: dtype, metric: time_ms, stat: median,"
      " logy: true, error_bars: true, legend: {a: Alpha}}");
  ASSERT_EQ(spec.figures.size(), 1u);
  EXPECT_TRUE(spec.tables.empty());
  const FigureSpec& f = spec.figures[0];
  EXPECT_EQ(f.kind, "bar");
  EXPECT_EQ(f.series, (std::vector<std::string>{"impl", "part"}));
  EXPECT_EQ(f.panel, "dtype");
  EXPECT_EQ(f.stat, "median");
  EXPECT_TRUE(f.logy && f.error_bars && !f.logx);
  EXPECT_EQ(f.legend.at("a"), "Alpha");
  EXPECT_EQ(f.xlabel, "size");  // defaults: the key and the metric
  EXPECT_EQ(f.ylabel, "time_ms");
  EXPECT_EQ(f.title, "bw");
}

TEST(FigureSpec, UnknownKeyNamesFileLineKeyAndTheClosestKey) {
  const std::string error =
      parse_error("id: r\nfigures:\n  - name: f\n    x: size\n    metric: time_ms\n    logz: true\n");
  EXPECT_EQ(error, "experiments/x.yaml:6:5: report.figures[0].logz: unknown key; did you mean 'logx'?");
}

TEST(FigureSpec, MissingMetricOrXSaysWhatToAdd) {
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, x: size}]}")
                .find("report.figures[0].metric: missing; name the metric on the y axis"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, metric: m}]}")
                .find("report.figures[0].x: missing; name the key on the x axis"),
            std::string::npos);
}

TEST(FigureSpec, BadValuesAreRefusedOneByOne) {
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, x: s, metric: m, kind: pie}]}")
                .find("report.figures[0].kind: unknown kind 'pie'; expected line or bar"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, x: s, metric: m, kind: bar, logx: true}]}")
                .find("report.figures[0].logx: a bar figure has categories on x"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, x: s, metric: m, stat: medain}]}")
                .find("report.figures[0].stat: unknown stat 'medain'"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r, figures: [{name: f, x: s, metric: m}, {name: f, x: s, metric: m}]}")
                .find("report.figures[1].name: duplicate figure name"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r, figures: []}").find("report.figures: expected a list of figures"),
            std::string::npos);
  EXPECT_NE(parse_error("{id: r}").find("report.tables: expected a list of tables"), std::string::npos);
}

TEST(FigureData, OnePointPerSeriesAndXFromAggregateRecordsLastWins) {
  FigureSpec spec = parse("{name: f, x: size, series: [impl], metric: time_ms, stat: median, error_bars: true,"
                          " legend: {a: Alpha}}").figures[0];
  const std::vector<json> records = {record("p", "10", 5.0), record("p", "1", 2.0),
                                     record("p", "1", 99.0, {{"rank", "1"}}),  // a rank's own record: not plotted
                                     record("p", "1", 3.0),                    // re-run later: wins
                                     record("p", "100", 0, json::object(), "oom")};
  const json data = figure_data(spec, records);
  ASSERT_EQ(data["panels"].size(), 1u);
  const json& series = data["panels"][0]["series"];
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0]["label"], "Alpha");
  ASSERT_EQ(series[0]["points"].size(), 2u);
  EXPECT_EQ(series[0]["points"][0]["x"], 10.0);  // numbers when every x is one
  EXPECT_EQ(series[0]["points"][0]["y"], 6.0);   // the median
  EXPECT_EQ(series[0]["points"][1]["y"], 4.0);
  EXPECT_EQ(series[0]["points"][1]["std"], 0.5);
  EXPECT_EQ(data["not_plotted"]["oom"], 1);
  EXPECT_TRUE(data["categories"].empty());
  EXPECT_NE(figure_caption(spec, records).find("Not plotted (no value): 1 oom point(s)."), std::string::npos);
}

TEST(FigureData, PartWherePanelsAndCategories) {
  FigureSpec spec =
      parse("{name: f, kind: bar, x: size, series: [part], panel: impl, where: {impl: a}, metric: time_ms}").figures[0];
  json other = record("q", "small", 7.0);
  other["params"]["impl"] = "b";  // filtered out by where
  const json data = figure_data(spec, stored({record("p", "small", 1.0), record("q", "large", 2.0), other}));
  EXPECT_EQ(data["categories"], json({"small", "large"}));
  ASSERT_EQ(data["panels"].size(), 1u);
  EXPECT_EQ(data["panels"][0]["title"], "impl = a");
  ASSERT_EQ(data["panels"][0]["series"].size(), 2u);
  EXPECT_EQ(data["panels"][0]["series"][1]["label"], "q");
  EXPECT_EQ(data["panels"][0]["series"][1]["points"][0]["x"], "large");
}

TEST(FigureFiles, WithoutPythonTheTablesStillRenderAndTheLatexSaysTheFigureIsMissing) {
  const auto dir = fresh_dir("figure-nopython");
  const ReportSpec spec = parse_report_spec(
      YAML::Load("{id: r, tables: [{name: t, rows: [size], columns: [{metric: time_ms}]}],"
                 " figures: [{name: f, title: Time, x: size, metric: time_ms}]}"),
      "exp.yaml");
  const char* saved = std::getenv("RUNNER_PYTHON");
  const std::string saved_value = saved ? saved : "";
  setenv("RUNNER_PYTHON", "/nonexistent/python3", 1);
  ::testing::internal::CaptureStderr();
  const auto written = write_report(spec, stored({record("p", "1", 2.0)}), dir);
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (saved) setenv("RUNNER_PYTHON", saved_value.c_str(), 1);
  else unsetenv("RUNNER_PYTHON");
  EXPECT_EQ(err, "warning: r: figures not drawn: cannot run Python '/nonexistent/python3' (set RUNNER_PYTHON or run "
                 "scripts/setup.sh)\n");
  EXPECT_TRUE(std::filesystem::exists(dir / "r" / "r.t.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir / "r/figures/r-f.svg"));
  const std::string tex = read_file(dir / "r" / "r.tex");
  EXPECT_NE(tex.find("\\IfFileExists{r/figures/r-f.pdf}{\\includegraphics"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\\label{fig:r:f}"), std::string::npos);
  const std::string md = read_file(dir / "r" / "r.md");
  EXPECT_NE(md.find("<!-- runner:figure f begin -->\n## Time\n\n![Time](figures/r-f.svg)"), std::string::npos) << md;
}

TEST(FigureFiles, MatplotlibWritesSvgAndPdfOnlyAndProseAroundTheMarkersSurvives) {
  const std::string python = std::getenv("RUNNER_PYTHON") ? std::getenv("RUNNER_PYTHON") : RUNNER_PYTHON_FOR_TESTS;
  if (std::system(("\"" + python + "\" -c 'import matplotlib' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " cannot import matplotlib (scripts/setup.sh installs it)";
  const auto dir = fresh_dir("figure-matplotlib");
  const ReportSpec spec = parse("{name: f, x: size, series: [impl], metric: time_ms, logx: true}");
  write_report(spec, stored({record("p", "1", 2.0), record("p", "10", 3.0)}), dir);
  for (const char* ext : {".svg", ".pdf"})
    EXPECT_GT(std::filesystem::file_size(dir / ("r/figures/r-f" + std::string(ext))), 1000u) << ext;
  EXPECT_FALSE(std::filesystem::exists(dir / "r/figures/r-f.png"));  // nothing links a PNG
  write_file(dir / "r" / "r.md", read_file(dir / "r" / "r.md") + "\nAuthor prose.\n");
  write_report(spec, stored({record("p", "1", 2.0), record("p", "10", 3.0)}), dir);
  EXPECT_NE(read_file(dir / "r" / "r.md").find("Author prose."), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "r/figures/.r.figures.json"));  // the hand-off file is removed
}

const char* kEchoWithFigure = R"(experiment: echo_figure
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep: {value: [1.5, 2.5]}
report:
  id: echo_figure
  tables:
    - {name: values, rows: [value], columns: [{metric: value}]}
  figures:
    - {name: values, x: value, metric: value}
)";

TEST(FigureCheck, UnknownMetricOrPartIsAnInputErrorBeforeRunning) {
  const auto dir = fresh_dir("figure-check");
  std::string yaml = kEchoWithFigure;
  yaml.replace(yaml.rfind("metric: value}"), 14, "metric: valeu}");
  auto r = run_runner(write_file(dir / "a.yaml", yaml).string() + " --device cpu --out " + (dir / "a").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("report.figures[0].metric: no metric 'valeu' in the records of this experiment; did you "
                          "mean 'value'?"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "a"));

  yaml = kEchoWithFigure;
  yaml.replace(yaml.rfind("{name: values,"), 14, "{name: values, part: nope,");
  r = run_runner(write_file(dir / "b.yaml", yaml).string() + " --device cpu --out " + (dir / "b").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("report.figures[0].part: no part named 'nope'"), std::string::npos) << r.output;

  yaml = kEchoWithFigure;
  yaml.replace(yaml.rfind("x: value"), 8, "x: valu");
  r = run_runner(write_file(dir / "c.yaml", yaml).string() + " --device cpu --out " + (dir / "c").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("report.figures[0].x: no parameter or label 'valu'"), std::string::npos) << r.output;
}

TEST(FigureCheck, ARunWithoutPythonRendersTablesAndWarnsInOneLine) {
  const auto dir = fresh_dir("figure-run");
  const auto file = write_file(dir / "e.yaml", kEchoWithFigure);
  const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "run").string(),
                            "RUNNER_PYTHON=/nonexistent/python3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: echo_figure: figures not drawn: cannot run Python"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "run/reports/echo_figure/echo_figure.values.csv"));
}

TEST(LatexLog, UndefinedReferencesAndMissingInputsAreProblems) {
  EXPECT_EQ(latex_log_problem("(./writeup.tex\nLaTeX Warning: Reference `tab:x:y' on page 2 undefined on input line 7.\n"),
            "LaTeX Warning: Reference `tab:x:y' on page 2 undefined on input line 7.");
  EXPECT_EQ(latex_log_problem("LaTeX Warning: There were undefined references.\n"),
            "LaTeX Warning: There were undefined references.");
  EXPECT_EQ(latex_log_problem("./writeup.tex:40: LaTeX Error: File `missing.tex' not found.\n"),
            "./writeup.tex:40: LaTeX Error: File `missing.tex' not found.");
  EXPECT_EQ(latex_log_problem("! Package pdftex.def Error: File `figures/x.pdf' not found: using draft setting.\n"),
            "! Package pdftex.def Error: File `figures/x.pdf' not found: using draft setting.");
  // The error that stopped the pass, not the references it left undefined before it.
  EXPECT_EQ(latex_log_problem("LaTeX Warning: Reference `tab:x:y' on page 1 undefined on input line 7.\n"
                              "./writeup.tex:255: Undefined control sequence.\n"),
            "./writeup.tex:255: Undefined control sequence.");
  EXPECT_EQ(latex_log_problem("No file extra.tex.\n"), "No file extra.tex.");
}

TEST(LatexLog, FirstPassFilesAndOrdinaryWarningsAreNot) {
  EXPECT_EQ(latex_log_problem("No file writeup.aux.\nNo file writeup.toc.\n"
                              "Overfull \\hbox (3.0pt too wide) in paragraph at lines 5--6\n"
                              "LaTeX Font Info:    Trying to load font information\n"),
            "");
}

TEST(LatexLog, PdfWithoutLatexmkIsAOneLineError) {
  const auto dir = fresh_dir("pdf-nolatexmk");
  write_file(dir / "writeup.tex", "\\documentclass{article}\\begin{document}x\\end{document}\n");
  const auto r = run_runner("report --pdf --reports " + dir.string(), "PATH=/nonexistent");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("runner: latexmk not found: install it and TeX Live"), std::string::npos) << r.output;
  EXPECT_EQ(run_runner("report").exit_code, 2);
}

}  // namespace
}  // namespace runner::report
