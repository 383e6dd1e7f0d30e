// Nothing lost, nothing silently wrong: a point is in results.jsonl whole or not at
// all, and --resume runs again what is not whole or did not finish; one process
// writes a run directory at a time; a point past measure.timeout_s is stopped and
// says so; a point that measured NaN is `invalid`, not `ok`.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

// Three points of three records each (one per label).
const char* kThreeByThree = R"(experiment: torn
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
params: {labels: [a, b, c]}
sweep: {value: [1, 2, 3]}
report:
  id: torn
  tables:
    - {name: values, rows: [item], pivot: value, metric: value, format: "%.0f"}
)";

std::map<int, int> records_per_point(const std::filesystem::path& results, std::vector<std::string>* warnings) {
  std::map<int, int> count;
  for (const auto& r : report::read_result_lines(results, warnings)) ++count[r["point"].get<int>()];
  return count;
}

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::istringstream text(read_file(file));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

// kill -9 or a full disk in the middle of a point's records: the old runner's
// --resume counted the point done and the table showed what was there.
TEST(WholePoints, APointCutOffWhileWrittenIsSkippedByReadersAndRunAgainByResume) {
  const auto dir = fresh_dir("whole-torn");
  const auto file = write_file(dir / "torn.yaml", kThreeByThree);
  const auto out = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --out " + out.string()).exit_code, 0);
  auto lines = lines_of(out / "results.jsonl");
  ASSERT_EQ(lines.size(), 9u);
  lines.pop_back();  // point 2 keeps 2 of its 3 records
  std::string cut;
  for (const auto& line : lines) cut += line + "\n";
  write_file(out / "results.jsonl", cut);

  std::vector<std::string> warnings;
  const auto before = records_per_point(out / "results.jsonl", &warnings);
  EXPECT_EQ(before.count(2), 0u) << "a point without all its records was read";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("skipped point main[2]: 2 of its 3 records"), std::string::npos) << warnings[0];

  const auto resumed = run_runner(file.string() + " --device cpu --resume " + out.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  warnings.clear();
  const auto after = records_per_point(out / "results.jsonl", &warnings);
  EXPECT_EQ(after, (std::map<int, int>{{0, 3}, {1, 3}, {2, 3}}));
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(lines_of(out / "results.jsonl").size(), 9u) << "the cut-off records stayed in the file";
}

// An `error` point is run again by --resume (the old runner ran nothing and exited
// 0), and its new record replaces the old one in the file's reading and the tables.
TEST(WholePoints, ResumeRunsAFailedPointAgainAndItsNewRecordReplacesTheOld) {
  const auto dir = fresh_dir("whole-error");
  const auto file = write_file(dir / "fails.yaml", R"(experiment: fails
measure: {warmup_steps: 0, measured_steps: 1}
task: fault
params: {fault: throw_int, at: 1}
sweep: {point: [0, 1, 2]}
report:
  id: fails
  tables:
    - {name: values, rows: [point], columns: [{metric: value, format: "%.0f"}]}
)");
  const auto out = dir / "run";
  EXPECT_EQ(run_runner(file.string() + " --device cpu --out " + out.string()).exit_code, 1);
  ASSERT_EQ(report::read_result_lines(out / "results.jsonl").at(1)["status"], "error");

  const auto resumed = run_runner(file.string() + " --device cpu --resume " + out.string(), "RUNNER_FAULT_DISARM=1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) EXPECT_EQ(r["status"], "ok") << r.dump();
  const std::string md = read_file(out / "reports" / "fails" / "fails.md");
  EXPECT_EQ(md.find("error"), std::string::npos) << md;
}

// Two processes writing one run directory doubled its records; the second is
// refused now, naming the first.
TEST(WholePoints, ASecondWriterOfARunDirectoryIsRefusedWithTheHoldersPid) {
  const auto dir = fresh_dir("whole-lock");
  const auto file = write_file(dir / "slow.yaml", kThreeByThree);
  const auto out = dir / "run";
  const auto pid_file = dir / "first.pid";
  const std::string first = "RUNNER_PLUGIN_PATH=" + std::string(RUNNER_TEST_PLUGIN_DIR) + "/extra " + RUNNER_EXE +
                            " " + file.string() + " --device cpu --set params.sleep_us=2000000 --out " + out.string() +
                            " > " + (dir / "first.log").string() + " 2>&1 & echo $! > " + pid_file.string();
  ASSERT_EQ(std::system(first.c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(out / "config.yaml") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(out / "config.yaml")) << read_file(dir / "first.log");
  const std::string pid = lines_of(pid_file).at(0);

  const auto second = run_runner(file.string() + " --device cpu --set params.sleep_us=2000000 --resume " + out.string());
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("--resume " + out.string() + ": another runner is writing this run directory (pid " +
                               pid + ")"),
            std::string::npos)
      << second.output;

  // Not our child: dead, it waits for init, which in a container may never reap it.
  const auto running = [&] {
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string pid_field, name, state;
    return static_cast<bool>(stat >> pid_field >> name >> state) && state != "Z";
  };
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(records_per_point(out / "results.jsonl", nullptr), (std::map<int, int>{{0, 3}, {1, 3}, {2, 3}}));
  // Once the first has finished, the directory is free again.
  const auto later = run_runner(file.string() + " --device cpu --set params.sleep_us=2000000 --resume " + out.string());
  EXPECT_EQ(later.exit_code, 0) << later.output;
}

// --resume wrote tables through a symlinked reports/ into wherever it pointed.
TEST(WholePoints, ResumeRefusesASymlinkedReportsFolder) {
  const auto dir = fresh_dir("whole-symlink");
  const auto file = write_file(dir / "torn.yaml", kThreeByThree);
  const auto out = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set sweep.value=[1] --out " + out.string()).exit_code, 0);
  std::filesystem::rename(out / "reports", dir / "elsewhere");
  std::filesystem::create_directory_symlink(dir / "elsewhere", out / "reports");
  const auto r = run_runner(file.string() + " --device cpu --set sweep.value=[1] --resume " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--resume " + out.string() + ": reports is a symbolic link"), std::string::npos) << r.output;
}

// A point that never returns (a loop in plugin code) used to run forever.
TEST(WholePoints, APointPastItsTimeoutIsRecordedAsTimeoutAndResumeRunsItAgain) {
  const auto dir = fresh_dir("whole-timeout");
  const auto file = write_file(dir / "hang.yaml", R"(experiment: hang
measure: {warmup_steps: 0, measured_steps: 1, timeout_s: 1}
task: fault
params: {fault: hang, at: 1}
sweep: {point: [0, 1, 2]}
)");
  const auto out = dir / "run";
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_runner(file.string() + " --device cpu --out " + out.string());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_NE(r.output.find("ran past measure.timeout_s (1 s)"), std::string::npos) << r.output;
  const auto records = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1]["status"], "timeout");
  EXPECT_EQ(records[1]["point"], 1);

  const auto resumed = run_runner(file.string() + " --device cpu --resume " + out.string(), "RUNNER_FAULT_DISARM=1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = report::read_result_lines(out / "results.jsonl");
  ASSERT_EQ(after.size(), 3u);
  for (const auto& record : after) EXPECT_EQ(record["status"], "ok") << record.dump();
}

// NaN was written as null and the point called ok; a task that emitted nothing, or
// records without a metric its manifest requires, was ok too.
TEST(WholePoints, ANaNMetricNoRecordOrAMissingRequiredMetricMakesThePointInvalid) {
  const auto dir = fresh_dir("whole-nan");
  const auto file = write_file(dir / "nan.yaml", R"(experiment: nan
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep: {fail: [none, nan, no_records, missing_metric]}
report:
  id: nan
  tables:
    - {name: values, rows: [fail], columns: [{metric: value, format: "%.0f"}]}
)");
  const auto out = dir / "run";
  const auto r = run_runner(file.string() + " --device cpu --out " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto lines = lines_of(out / "results.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  const auto nan = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(nan["status"], "invalid");
  EXPECT_EQ(nan["metrics"]["value"]["value"], "NaN");
  EXPECT_NE(nan["error"].get<std::string>().find("metric 'value' is NaN"), std::string::npos) << lines[1];
  const auto empty = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(empty["status"], "invalid");
  EXPECT_NE(empty["error"].get<std::string>().find("without emitting a record"), std::string::npos) << lines[2];
  const auto missing = nlohmann::json::parse(lines[3]);
  EXPECT_EQ(missing["status"], "invalid");
  EXPECT_EQ(missing["error"], "metric 'sleep_ms' is missing from the point's records (task/echo declares it for every "
                              "point with these options)")
      << lines[3];
  EXPECT_EQ(missing["metrics"]["value"]["value"], 1) << "the records it did emit are kept";
  EXPECT_EQ(nlohmann::json::parse(lines[0])["status"], "ok");
  const std::string md = read_file(out / "reports" / "nan" / "nan.md");
  EXPECT_NE(md.find("| invalid |"), std::string::npos) << md;
  EXPECT_NE(md.find("invalid = the point finished without a usable number"), std::string::npos) << md;
}

}  // namespace
}  // namespace runner
