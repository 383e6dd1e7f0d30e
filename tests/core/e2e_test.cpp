// The runner binary end to end on CPU: run directory, records, statuses, exit
// codes, reports, re-rendering, and plugins found through RUNNER_PLUGIN_PATH.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::write_file;

struct Result {
  int exit_code;
  std::string output;
};

Result run(const std::string& args) {
  const auto log = fresh_dir("e2e-log") / "out.txt";
  const std::string cmd = "RUNNER_PLUGIN_PATH=" + std::string(RUNNER_TEST_PLUGIN_DIR) + "/extra " +
                          std::string(RUNNER_EXE) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* kExperiment = R"(experiment: echo_demo
measure: {warmup_steps: 1, measured_steps: 2}
task: echo
params: {labels: [a, b]}
sweep:
  fail: [none, oom, error]
  value: [1.5, 2.5]
report:
  id: echo_demo
  title: Echo demo
  tables:
    - name: values
      title: Values
      rows: [fail, item]
      pivot: value
      metric: value
      format: "%.1f"
)";

TEST(EndToEnd, RunWritesRecordsStatusesReportsAndFailsAtTheEnd) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  const Result r = run(file.string() + " --device cpu --out " + out.string() + " --reports " + (dir / "reports").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;  // error points make the exit code non-zero
  EXPECT_NE(r.output.find("[6/6]"), std::string::npos) << r.output;

  const auto records = report::read_result_lines(out / "results.jsonl");
  // none: 2 values x 2 labels; oom and error: one record per point.
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[0]["labels"]["item"], "a");
  EXPECT_EQ(records[0]["metrics"]["sleep_ms"]["n"], 2);
  EXPECT_EQ(records[0]["metrics"]["value"]["unit"], "units");
  EXPECT_EQ(records[0]["params"]["measure.warmup_steps"], 1);
  EXPECT_EQ(records[0]["env"]["device"], "cpu");
  EXPECT_TRUE(records[0]["env"].contains("libtorch"));
  EXPECT_TRUE(records[0]["env"].contains("git_commit"));
  EXPECT_EQ(records[4]["status"], "oom");
  EXPECT_NE(records[4]["error"].get<std::string>().find("pretend CUDA out of memory"), std::string::npos);
  EXPECT_EQ(records[6]["status"], "error");
  EXPECT_EQ(records[6]["error"], "echo: asked to fail");

  EXPECT_TRUE(std::filesystem::exists(out / "config.yaml"));
  EXPECT_NE(read(out / "log.txt").find("echo: asked to fail"), std::string::npos);
  const std::string md = read(dir / "reports" / "echo_demo" / "echo_demo.md");
  EXPECT_NE(md.find("| none | a | 1.5 | 2.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| oom |  | OOM | OOM |"), std::string::npos) << md;
  EXPECT_NE(md.find("| error |  | error | error |"), std::string::npos) << md;
  EXPECT_TRUE(std::filesystem::exists(dir / "reports" / "echo_demo" / "echo_demo.tex"));
  EXPECT_EQ(read(out / "reports" / "echo_demo" / "echo_demo.md"), md);
}

TEST(EndToEnd, ReportSubcommandReRendersWithoutRunning) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  run(file.string() + " --device cpu --set sweep.fail=[none] --out " + out.string());
  const Result r = run("report " + out.string() + " --reports " + (dir / "again").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read(dir / "again" / "echo_demo" / "echo_demo.md"), read(out / "reports" / "echo_demo" / "echo_demo.md"));
}

// The project's reports (a folder with renders.txt) take records of a clean commit only;
// --allow-dirty lets others in and every caption says so.
TEST(EndToEnd, TheProjectsReportsRefuseRecordsOfADirtyCommitUnlessAllowed) {
  const auto dir = fresh_dir("e2e-dirty");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  std::filesystem::create_directories(dir / "committed");
  write_file(dir / "committed" / "renders.txt", "# the project's reports\n");
  ::setenv("RUNNER_GIT_COMMIT", "0123456789ab-dirty", 1);
  // A run into them is refused before it measures anything.
  const Result refused_run = run(file.string() + " --device cpu --set sweep.fail=[none] --out " +
                                 (dir / "refused").string() + " --reports " + (dir / "committed").string());
  ASSERT_EQ(refused_run.exit_code, 2) << refused_run.output;
  EXPECT_NE(refused_run.output.find("records of commit 0123456789ab-dirty"), std::string::npos) << refused_run.output;
  EXPECT_NE(refused_run.output.find("--allow-dirty"), std::string::npos) << refused_run.output;
  EXPECT_EQ(read(dir / "refused" / "results.jsonl"), "");  // no point measured
  ASSERT_EQ(run(file.string() + " --device cpu --set sweep.fail=[none] --out " + (dir / "run").string()).exit_code, 0);
  ::unsetenv("RUNNER_GIT_COMMIT");

  // Re-rendering its records is refused too, names the file, and writes nothing.
  const Result refused = run("report " + (dir / "run").string() + " --reports " + (dir / "committed").string());
  ASSERT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find((dir / "run" / "results.jsonl").string() + ": records of commit 0123456789ab-dirty"),
            std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "committed" / "echo_demo"));
  const Result allowed =
      run("report " + (dir / "run").string() + " --reports " + (dir / "committed").string() + " --allow-dirty");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  const std::string md = read(dir / "committed" / "echo_demo" / "echo_demo.md");
  EXPECT_NE(md.find("Rendered with --allow-dirty: records of commit 0123456789ab-dirty"), std::string::npos) << md;
  // Any other folder takes them as they are.
  ASSERT_EQ(run("report " + (dir / "run").string() + " --reports " + (dir / "scratch").string()).exit_code, 0);
  EXPECT_EQ(read(dir / "scratch" / "echo_demo" / "echo_demo.md").find("--allow-dirty"), std::string::npos);
}

// A kernel's README quotes a report's values by their full name ({{value <id>.<name>}}):
// `runner report` into the project's reports renders them there, `runner report --check`
// fails when the README is staler than its records, and a name the report lacks is an error.
TEST(EndToEnd, AKernelReadmeQuotesAReportsValuesRenderedAndChecked) {
  const auto root = fresh_dir("e2e-cited");
  std::filesystem::create_directories(root / "reports");
  std::filesystem::create_directories(root / "experiments");
  std::filesystem::create_directories(root / "kernels" / "k");
  write_file(root / "reports" / "renders.txt", "# the project's reports\n");
  const auto file = write_file(root / "experiments" / "cited.yaml", R"(experiment: cited
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep:
  value: [1.5, 2.5]
report:
  id: cited
  title: Cited
  values:
    - {name: high, expr: 'column_max("values", "value")', format: "%.1f"}
  tables:
    - name: values
      title: Values
      rows: [value]
      columns:
        - {header: value, metric: value, format: "%.1f"}
)");
  const auto readme = write_file(root / "kernels" / "k" / "README.md",
                                 "High: {{value cited.high}}; another report's: {{value other.x}}.\n");
  ::setenv("RUNNER_GIT_COMMIT", "0123456789ab", 1);
  const auto data = root / "reports" / "cited" / "data";
  ASSERT_EQ(run(file.string() + " --device cpu --out " + data.string()).exit_code, 0);
  ::unsetenv("RUNNER_GIT_COMMIT");
  // Another folder's render leaves the README alone.
  ASSERT_EQ(run("report " + data.string() + " --reports " + (root / "elsewhere").string()).exit_code, 0);
  EXPECT_EQ(read(readme), "High: {{value cited.high}}; another report's: {{value other.x}}.\n");

  const Result rendered = run("report " + data.string() + " --reports " + (root / "reports").string());
  ASSERT_EQ(rendered.exit_code, 0) << rendered.output;
  const std::string quoted = "High: <!-- runner:value cited.high -->2.5<!-- runner:value end -->; another report's: "
                             "{{value other.x}}.\n";
  EXPECT_EQ(read(readme), quoted);
  const Result fresh = run("report --check --reports " + (root / "reports").string());
  EXPECT_EQ(fresh.exit_code, 0) << fresh.output;

  write_file(readme, "High: <!-- runner:value cited.high -->9.9<!-- runner:value end -->; another report's: "
                     "{{value other.x}}.\n");
  const Result stale = run("report --check --reports " + (root / "reports").string());
  EXPECT_EQ(stale.exit_code, 1) << stale.output;
  EXPECT_NE(stale.output.find(readme.string() + ": stale"), std::string::npos) << stale.output;

  write_file(readme, "Nope: {{value cited.nope}}\n");
  const Result undeclared = run("report " + data.string() + " --reports " + (root / "reports").string());
  EXPECT_EQ(undeclared.exit_code, 2) << undeclared.output;
  EXPECT_NE(undeclared.output.find("value 'cited.nope' is not declared"), std::string::npos) << undeclared.output;
  EXPECT_NE(undeclared.output.find(readme.string()), std::string::npos) << undeclared.output;
}

TEST(EndToEnd, InvalidExperimentFailsBeforeRunningWithOneLine) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const Result r = run(file.string() + " --device cpu --set params.valeu=3 --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "runner: --set params.valeu=3: params.valeu: unknown option; did you mean 'value'?\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(EndToEnd, ExistingRunDirectoryIsNeverOverwritten) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  run(file.string() + " --device cpu --set sweep.fail=[none] --out " + out.string());
  const std::string before = read(out / "results.jsonl");
  const Result r = run(file.string() + " --device cpu --set sweep.fail=[none] --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("exists and is not empty"), std::string::npos) << r.output;
  EXPECT_EQ(read(out / "results.jsonl"), before);
}

TEST(EndToEnd, DryRunListsPointsAndWritesNothing) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const Result r = run(file.string() + " --device cpu --dry-run --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("echo_demo: 6 points on cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("main[5] task=echo fail=error value=2.5"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(EndToEnd, PluginsListsPluginsFromRunnerPluginPathAndDescribeShowsOptions) {
  const Result list = run("plugins");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.output.find("test task: echoes options as metrics"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("test_plugins/extra/test_echo.so"), std::string::npos);
  const Result describe = run("describe task/echo");
  EXPECT_EQ(describe.exit_code, 0);
  EXPECT_NE(describe.output.find("fail"), std::string::npos);
  EXPECT_NE(describe.output.find("one of none|oom|error|crash|skip|device_fault|duplicate_metric|nan|no_records|missing_metric, default none"), std::string::npos) << describe.output;
  EXPECT_EQ(run("describe task/nope").exit_code, 2);
}

TEST(EndToEnd, CrashMidSweepKeepsFinishedRecords) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  const Result r = run(file.string() + " --device cpu --set sweep.fail=[none,crash] --out " + out.string());
  EXPECT_NE(r.exit_code, 0);
  const auto records = report::read_result_lines(out / "results.jsonl");
  // Both points of fail=none (two labels each), then the crashed point's own error record.
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[4]["status"], "error");
  EXPECT_NE(records[4]["error"].get<std::string>().find("SIGABRT"), std::string::npos) << records[4].dump();
}

TEST(EndToEnd, SkippedPointIsItsOwnStatusWithAReasonAndNotAFailure) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  const Result r = run(file.string() + " --device cpu --set sweep.fail=[none,skip] --set sweep.value=[1.5] --out " +
                       out.string() + " --reports " + (dir / "reports").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;  // skipped is not an error
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2]["status"], "skipped");
  EXPECT_EQ(records[2]["reason"], "echo: this configuration is not supported");
  EXPECT_FALSE(records[2].contains("error"));
  const std::string md = read(dir / "reports" / "echo_demo" / "echo_demo.md");
  EXPECT_NE(md.find("| skip |  | skipped |"), std::string::npos) << md;
}

TEST(EndToEnd, DeviceFaultEndsTheSweepWithOneMessageAndKeepsEarlierRecords) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  const Result r = run(file.string() + " --device cpu --set sweep.fail=[none,device_fault,none] --set sweep.value=[1.5] "
                       "--out " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the device is unusable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped after point 2 of 3"), std::string::npos) << r.output;
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);  // point 1: two labels; point 2: its error; point 3 never ran
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[2]["status"], "error");
  EXPECT_EQ(records[2]["error"], "echo: pretend illegal memory access");
  EXPECT_TRUE(std::filesystem::exists(out / "reports" / "echo_demo" / "echo_demo.md"));  // tables from what was recorded
}

TEST(EndToEnd, DuplicateMetricNameMakesThePointAnError) {
  const auto dir = fresh_dir("e2e");
  const auto file = write_file(dir / "echo.yaml", kExperiment);
  const auto out = dir / "run";
  const Result r = run(file.string() + " --device cpu --set sweep.fail=[duplicate_metric] --set sweep.value=[1.5] "
                       "--out " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "error");
  EXPECT_NE(records[0]["error"].get<std::string>().find("metric 'value' added twice"), std::string::npos);
}

TEST(EndToEnd, ADisabledPartIsLeftOutAndItsTablesStayValid) {
  const auto dir = fresh_dir("e2e-disabled");
  const auto file = write_file(dir / "two.yaml", R"(experiment: two
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: kept, task: echo, sweep: {value: [1, 2]}}
  - {name: dropped, task: echo, params: {word: only_here}, sweep: {value: [3]}}
report:
  id: two
  tables:
    - {name: dropped_only, part: dropped, rows: [word], pivot: value, metric: value}
)");
  const Result r = run(file.string() + " --device cpu --set parts.dropped.enabled=false --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string results = read(dir / "run" / "results.jsonl");
  EXPECT_EQ(std::count(results.begin(), results.end(), '\n'), 2) << results;
  // No point of the part (the environment names the override that dropped it).
  EXPECT_EQ(results.find("\"part\":\"dropped\""), std::string::npos) << results;
  EXPECT_EQ(results.find("only_here"), std::string::npos) << results;
  const Result none = run(file.string() + " --device cpu --dry-run --set parts.kept.enabled=false --set parts.dropped.enabled=no");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("every part has enabled: false"), std::string::npos) << none.output;
  const Result bad = run(file.string() + " --device cpu --dry-run --set parts.kept.enabled=maybe");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("parts.kept.enabled: expected true or false"), std::string::npos) << bad.output;
}

// A table may read several parts (a C++ part and its PyTorch twin in one table), and only those.
TEST(EndToEnd, ATableOverAListOfPartsReadsThoseParts) {
  const auto dir = fresh_dir("e2e-part-list");
  const auto file = write_file(dir / "three.yaml", R"(experiment: three
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: ours, task: echo, params: {word: ours}, sweep: {value: [1]}}
  - {name: theirs, task: echo, params: {word: theirs}, sweep: {value: [2]}}
  - {name: other, task: echo, params: {word: other}, sweep: {value: [3]}}
report:
  id: three
  tables:
    - {name: pair, part: [ours, theirs], rows: [word], pivot: value, metric: value, format: "%.0f"}
)");
  const Result r = run(file.string() + " --device cpu --history off --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string table = read(dir / "run" / "reports" / "three" / "three.md");
  EXPECT_NE(table.find("| ours |"), std::string::npos) << table;
  EXPECT_NE(table.find("| theirs |"), std::string::npos) << table;
  EXPECT_EQ(table.find("other"), std::string::npos) << table;
}

// An echo experiment over value 1, 2 whose report `name` has one table, `values`.
std::string echo_values_experiment(const std::string& name) {
  return "experiment: " + name + R"(
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep: {value: [1, 2]}
report:
  id: )" + name + R"(
  tables:
    - {name: values, rows: [word], pivot: value, metric: value, format: "%.0f"}
)";
}

TEST(EndToEnd, ReportMergesRunsOfOneExperimentAndRefusesOthers) {
  const auto dir = fresh_dir("e2e-merge");
  const auto file = write_file(dir / "merge.yaml", echo_values_experiment("merge"));
  ASSERT_EQ(run(file.string() + " --device cpu --out " + (dir / "a").string()).exit_code, 0);
  ASSERT_EQ(run(file.string() + " --device cpu --set sweep.value=[3] --out " + (dir / "b").string()).exit_code, 0);
  const Result merged = run("report " + (dir / "a").string() + " " + (dir / "b").string() + " --reports " +
                            (dir / "merged").string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  const std::string md = read(dir / "merged" / "merge" / "merge.md");
  EXPECT_NE(md.find("| 1 | 2 | 3 |"), std::string::npos) << md;  // pivot headers from both runs
  EXPECT_EQ(md.find("Partial run"), std::string::npos) << md;      // each run is complete on its own

  const auto other = write_file(dir / "other.yaml", R"(experiment: other
task: echo
report:
  id: merge
  tables:
    - {name: values, rows: [word], pivot: value, metric: value}
)");
  ASSERT_EQ(run(other.string() + " --device cpu --out " + (dir / "c").string()).exit_code, 0);
  const Result refused = run("report " + (dir / "a").string() + " " + (dir / "c").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("not the experiment or report spec of"), std::string::npos) << refused.output;
}

// Records taken before a table was added render with today's spec through --spec.
TEST(EndToEnd, ReportSpecRendersOldRecordsWithTheExperimentFilesTables) {
  const auto dir = fresh_dir("e2e-spec");
  const std::string head = echo_values_experiment("grown");
  const auto old_file = write_file(dir / "old.yaml", head);
  ASSERT_EQ(run(old_file.string() + " --device cpu --out " + (dir / "a").string()).exit_code, 0);
  const auto new_file =
      write_file(dir / "new.yaml", head + "    - {name: doubled, title: Added later, rows: [word], pivot: value, "
                                          "metric: value, format: \"%.1f\"}\n");
  ASSERT_EQ(run(new_file.string() + " --device cpu --set sweep.value=[3] --out " + (dir / "b").string()).exit_code, 0);
  const std::string runs = (dir / "a").string() + " " + (dir / "b").string();
  EXPECT_NE(run("report " + runs).output.find("--spec experiments/<name>.yaml"), std::string::npos);
  const Result r = run("report " + runs + " --spec " + new_file.string() + " --reports " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = read(dir / "out" / "grown" / "grown.md");
  EXPECT_NE(md.find("Added later"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.0 | 2.0 | 3.0 |"), std::string::npos) << md;  // the old run's records in the new table

  const auto other = write_file(dir / "other.yaml", "experiment: other\ntask: echo\nreport: {id: x, tables: []}\n");
  const Result wrong = run("report " + runs + " --spec " + other.string());
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("a run of another experiment than --spec"), std::string::npos) << wrong.output;
  const Result misplaced = run(new_file.string() + " --device cpu --dry-run --spec " + new_file.string());
  EXPECT_NE(misplaced.output.find("--spec belongs to `runner report`"), std::string::npos) << misplaced.output;
}

}  // namespace
}  // namespace runner
