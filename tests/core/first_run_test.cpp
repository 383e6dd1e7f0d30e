// What a new user meets on the command line (issue 29): results on stdout as each
// point finishes and a summary table, --filter, experiments by name, --set on a
// swept axis, bare key=value overrides and --cfg, launch --help, a suggestion for a
// mistyped flag, --set report.* errors that name the --set, and a run piped into
// `head` that still finishes.
#include <gtest/gtest.h>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

const char* kTwo = R"(experiment: two
measure: {warmup_steps: 0, measured_steps: 3}
task: echo
params: {sleep_us: 1000}
sweep: {value: [1.5, 2.5]}
report:
  id: two
  tables:
    - {name: values, rows: [item], pivot: value, metric: value, format: "%.1f"}
)";

// stdout and stderr apart: results belong on stdout, progress on stderr.
struct Split {
  int exit_code;
  std::string out, err;
};
Split run_split(const std::string& args, const std::string& cwd = "") {
  const auto dir = fresh_dir("first-run-io");
  const std::string cmd = (cwd.empty() ? "" : "cd " + cwd + " && ") + "RUNNER_PLUGIN_PATH=" +
                          std::string(RUNNER_TEST_PLUGIN_DIR) + "/extra " + RUNNER_EXE + " " + args + " > " +
                          (dir / "out").string() + " 2> " + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "out"), read_file(dir / "err")};
}

TEST(FirstRun, EachPointPrintsItsResultOnStdoutAndASummaryTableCloses) {
  const auto dir = fresh_dir("first-run-print");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto r = run_split(file.string() + " --device cpu --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[1/2] main value=1.5  ok  sleep_ms "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2/2] main value=2.5  ok  sleep_ms "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ms ±"), std::string::npos) << r.out;  // median and its relative standard error
  // The closing table: a header, one row per point, and the count.
  const auto header = r.out.find("\npoint ");
  ASSERT_NE(header, std::string::npos) << r.out;
  const std::string header_line = r.out.substr(header + 1, r.out.find('\n', header + 1) - header - 1);
  EXPECT_NE(header_line.find("status"), std::string::npos) << header_line;
  EXPECT_NE(header_line.find("sleep_ms"), std::string::npos) << header_line;
  EXPECT_NE(r.out.find("\nmain value=2.5  ok  ", header), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 points in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 ok)"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("sleep_ms"), std::string::npos) << "results went to stderr: " << r.err;
}

TEST(FirstRun, FilterRunsOnlyMatchingPointsAndRefusesAFilterThatMatchesNone) {
  const auto dir = fresh_dir("first-run-filter");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto r = run_runner(file.string() + " --device cpu --filter 'value=2\\.5' --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = report::read_result_lines(dir / "run" / "results.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["point"], 1);  // the second point, under its own index
  const auto none = run_runner(file.string() + " --device cpu --filter 'size=' --out " + (dir / "none").string());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("--filter 'size=' matches none of the points (labels look like 'main value=1.5'"),
            std::string::npos) << none.output;
  EXPECT_EQ(run_runner(file.string() + " --filter '(' --dry-run").exit_code, 2);
}

TEST(FirstRun, AnExperimentIsFoundByItsNameUnderExperiments) {
  const auto dir = fresh_dir("first-run-name");
  std::filesystem::create_directories(dir / "experiments");
  write_file(dir / "experiments" / "two.yaml", kTwo);
  const auto r = run_split("two --device cpu --dry-run", dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("two: 2 points on cpu"), std::string::npos) << r.out;
  const auto typo = run_split("tow --dry-run", dir.string());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("'tow': no such experiment file, and no experiments/tow.yaml; did you mean 'two'?"),
            std::string::npos) << typo.err;
}

TEST(FirstRun, SetOnASweptAxisReplacesTheAxisAndAListIsNotAScalar) {
  const auto dir = fresh_dir("first-run-set");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto r = run_split(file.string() + " --device cpu --set params.value=7 --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("two: 1 points on cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("note: --set params.value=7 replaces the sweep axis value: [1.5, 2.5]"), std::string::npos)
      << r.err;
  const auto list = run_runner(file.string() + " --device cpu --set 'params.value=[1, 2]' --dry-run");
  EXPECT_EQ(list.exit_code, 2) << list.output;
  EXPECT_NE(list.output.find("--set params.value=[1, 2]: params.value: expected a float, got [1, 2] (a list of "
                             "values is a sweep"),
            std::string::npos) << list.output;
}

TEST(FirstRun, BareOverridesAreSetsAndCfgPrintsTheResolvedExperiment) {
  const auto dir = fresh_dir("first-run-cfg");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto r = run_split(file.string() + " sweep.value=[4] params.sleep_us=5 --cfg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# resolved from " + file.string() + "\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("sleep_us: 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("value: [4]"), std::string::npos) << r.out;
  const auto stray = run_runner(file.string() + " stray --dry-run");
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_NE(stray.output.find("unexpected argument 'stray' (after the experiment, only key.path=value overrides or more experiment files)"),
            std::string::npos) << stray.output;
}

TEST(FirstRun, LaunchHasItsOwnHelpAndAMistypedFlagGetsASuggestion) {
  const auto help = run_runner("launch --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.output.rfind("usage: runner launch --nproc-per-node N", 0), 0u) << help.output;
  const auto typo = run_runner("x.yaml --sett a=1");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.output, "runner: unknown option --sett; did you mean '--set'? (runner --help lists them)\n");
}

TEST(FirstRun, ASetOfAReportKeyIsBlamedOnTheSetNotOnLineOne) {
  const auto dir = fresh_dir("first-run-report-set");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto r = run_runner(file.string() + " --device cpu --set report.tables.0.metric=nope --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("runner: --set report.tables.0.metric=nope: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(":1:1"), std::string::npos) << r.output;
}

// `runner x.yaml | head -1` closes stdout after one line: the run still records
// every point and ends its log normally.
TEST(FirstRun, AClosedStdoutDoesNotKillTheRun) {
  const auto dir = fresh_dir("first-run-pipe");
  const auto file = write_file(dir / "two.yaml", kTwo);
  const auto run = dir / "run";
  const std::string cmd = "bash -c 'RUNNER_PLUGIN_PATH=" + std::string(RUNNER_TEST_PLUGIN_DIR) + "/extra " +
                          RUNNER_EXE + " " + file.string() + " --device cpu --out " + run.string() +
                          " 2>/dev/null | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}'";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(report::read_result_lines(run / "results.jsonl").size(), 2u);
  EXPECT_NE(read_file(run / "log.txt").find("finished: 2 points, 0 failed"), std::string::npos)
      << read_file(run / "log.txt");
}

}  // namespace
}  // namespace runner
