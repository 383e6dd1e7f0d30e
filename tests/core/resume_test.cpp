// Long sweeps that die: a kill mid-sweep leaves every finished record, a report
// of the run says it is partial, --resume runs only what is missing, and Ctrl-C
// records the point in flight as interrupted and exits 130.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

// 8 points of ~0.3 s each.
const char* kSlow = R"(experiment: slow
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
params: {sleep_us: 300000}
sweep: {value: [1, 2, 3, 4, 5, 6, 7, 8]}
report:
  id: slow
  tables:
    - {name: values, rows: [item], pivot: value, metric: value, format: "%.0f"}
)";

std::map<int, int> finished_per_point(const std::filesystem::path& results) {
  std::map<int, int> count;
  for (const auto& r : report::read_result_lines(results))
    if (r["status"] != "interrupted") ++count[r["point"].get<int>()];
  return count;
}

TEST(Resume, KilledSweepResumesToUniqueCompleteRecords) {
  const auto dir = fresh_dir("resume-kill");
  const auto file = write_file(dir / "slow.yaml", kSlow);
  const auto out = dir / "run";
  const auto killed = run_runner("", "timeout -s KILL 2.5 " + std::string(RUNNER_EXE) + " " + file.string() +
                                         " --device cpu --out " + out.string() + " ; true ; exit 0 ;");
  (void)killed;
  ASSERT_TRUE(std::filesystem::exists(out / "results.jsonl"));
  const auto before = finished_per_point(out / "results.jsonl");
  ASSERT_LT(before.size(), 8u) << "the kill came after the sweep finished; slow the points down";

  // The partial run re-renders, flagged as partial, into its own reports/.
  const auto report = run_runner("report " + out.string());
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("partial run: records for " + std::to_string(before.size()) + " of 8 points"),
            std::string::npos) << report.output;
  EXPECT_NE(read_file(out / "reports" / "slow" / "slow.md").find("Partial run: records for"), std::string::npos);

  const auto resumed = run_runner(file.string() + " --device cpu --resume " + out.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = finished_per_point(out / "results.jsonl");
  ASSERT_EQ(after.size(), 8u);
  for (const auto& [point, n] : after) EXPECT_EQ(n, 1) << "point " << point << " recorded " << n << " times";
  EXPECT_EQ(read_file(out / "reports" / "slow" / "slow.md").find("Partial run"), std::string::npos);
}

TEST(Resume, RefusesWhenTheResolvedConfigDiffers) {
  const auto dir = fresh_dir("resume-differs");
  const auto file = write_file(dir / "slow.yaml", kSlow);
  const auto out = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set sweep.value=[1] --out " + out.string()).exit_code, 0);
  const auto r = run_runner(file.string() + " --device cpu --set sweep.value=[1,2] --resume " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--resume " + out.string() + ": the resolved config differs from " +
                          (out / "config.yaml").string()),
            std::string::npos) << r.output;
  EXPECT_EQ(finished_per_point(out / "results.jsonl").size(), 1u);
}

TEST(Resume, CtrlCRecordsThePointInFlightAsInterruptedAndExits130) {
  const auto dir = fresh_dir("resume-int");
  const auto file = write_file(dir / "slow.yaml", kSlow);
  const auto out = dir / "run";
  const auto r = run_runner("", "timeout -s INT --preserve-status 2.5 " + std::string(RUNNER_EXE) + " " +
                                    file.string() + " --device cpu --out " + out.string() + "; exit $? ;");
  EXPECT_EQ(r.exit_code, 130) << r.output;
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back()["status"], "interrupted");
  EXPECT_NE(read_file(out / "log.txt").find("interrupted by SIGINT"), std::string::npos) << read_file(out / "log.txt");
  // The tables of the points finished before Ctrl-C are there, flagged partial.
  EXPECT_NE(read_file(out / "reports" / "slow" / "slow.md").find("Partial run"), std::string::npos) << r.output;

  EXPECT_EQ(run_runner(file.string() + " --device cpu --resume " + out.string()).exit_code, 0);
  const auto after = finished_per_point(out / "results.jsonl");
  EXPECT_EQ(after.size(), 8u);
  for (const auto& [point, n] : after) EXPECT_EQ(n, 1);
}

TEST(Resume, ConfigYamlIsWrittenWithoutAnchors) {
  const auto dir = fresh_dir("resume-plain");
  const auto file = write_file(dir / "e.yaml",
                               "experiment: plain\nmeasure: {warmup_steps: 0, measured_steps: 1}\ntask: echo\n"
                               "params: &p {value: 2}\nsmoke:\n  params: *p\n  sweep.value: [1]\n");
  ASSERT_EQ(run_runner(file.string() + " --device cpu --smoke --out " + (dir / "run").string()).exit_code, 0);
  const std::string config = read_file(dir / "run" / "config.yaml");
  EXPECT_EQ(config.find('&'), std::string::npos) << config;
  EXPECT_EQ(config.find('*'), std::string::npos) << config;
  EXPECT_TRUE(std::filesystem::is_directory(dir / "run" / "artifacts"));
}

TEST(ReportDefault, ReRenderWritesIntoTheRunNotTheWorkingDirectory) {
  const auto dir = fresh_dir("report-default");
  const auto file = write_file(dir / "slow.yaml", kSlow);
  const auto out = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set params.sleep_us=0 --out " + out.string()).exit_code, 0);
  std::filesystem::remove(out / "reports" / "slow" / "slow.md");
  const auto cwd = fresh_dir("report-cwd");
  const auto r = run_runner("", "cd " + cwd.string() + " && " + RUNNER_EXE + " report " + out.string() + " ; exit $? ;");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "reports" / "slow" / "slow.md"));
  EXPECT_FALSE(std::filesystem::exists(cwd / "reports"));
}

TEST(ReportDefault, TruncatedLastRecordIsSkippedNotFatal) {
  const auto dir = fresh_dir("report-truncated");
  const auto file = write_file(dir / "slow.yaml", kSlow);
  const auto out = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set params.sleep_us=0 --out " + out.string()).exit_code, 0);
  std::ofstream(out / "results.jsonl", std::ios::app) << "{\"experiment\": \"slow\", \"part\": \"ma";
  const auto r = run_runner("report " + out.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(":9: skipped a truncated last record"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace runner
