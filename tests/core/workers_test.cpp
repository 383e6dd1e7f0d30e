// --workers N: a sweep's points spread over N worker processes, one writer. The same
// points and records (timings aside) as a serial run, each record naming its worker,
// and a worker that dies mid-point costs only that point.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

const char* kTwelve = R"(experiment: twelve_pool
measure: {warmup_steps: 0, measured_steps: 2}
task: echo
params: {sleep_us: 50000, labels: [x, y]}
sweep: {value: [1, 2, 3, 4, 5, 6], word: [hi, ho]}
report:
  id: twelve_pool
  tables:
    - {name: values, rows: [word, item], pivot: value, metric: value, format: "%.0f"}
)";

TEST(Workers, ThreeWorkersRecordWhatASerialRunRecords) {
  const auto dir = fresh_dir("workers");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto serial = run_runner(file.string() + " --device cpu --out " + (dir / "serial").string());
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  const auto pooled = run_runner(file.string() + " --device cpu --workers 3 --out " + (dir / "pool").string());
  ASSERT_EQ(pooled.exit_code, 0) << pooled.output;
  const auto records = report::comparable_records(dir / "pool" / "results.jsonl");
  EXPECT_EQ(records.size(), 24u);
  EXPECT_EQ(records, report::comparable_records(dir / "serial" / "results.jsonl"));
  std::set<int> workers;
  for (const auto& r : report::read_result_lines(dir / "pool" / "results.jsonl")) {
    ASSERT_TRUE(r["env"].contains("worker")) << r.dump();
    workers.insert(r["env"]["worker"].get<int>());
  }
  for (int w : workers) EXPECT_TRUE(w >= 0 && w < 3) << w;
  EXPECT_GE(workers.size(), 2u) << "the points ran on one worker only";
  EXPECT_NE(pooled.output.find("[12/12] main"), std::string::npos) << pooled.output;
  EXPECT_NE(pooled.output.find("(worker "), std::string::npos) << pooled.output;
  // The same table, and a caption that says the points ran side by side.
  EXPECT_EQ(read_file(dir / "pool" / "reports" / "twelve_pool" / "twelve_pool.values.csv"),
            read_file(dir / "serial" / "reports" / "twelve_pool" / "twelve_pool.values.csv"));
  const std::string md = read_file(dir / "pool" / "reports" / "twelve_pool" / "twelve_pool.md");
  EXPECT_NE(md.find("points ran concurrently on " + std::to_string(workers.size()) + " worker processes of the host"),
            std::string::npos) << md;
  EXPECT_EQ(read_file(dir / "serial" / "reports" / "twelve_pool" / "twelve_pool.md").find("concurrently"),
            std::string::npos);
}

TEST(Workers, AWorkerThatDiesCostsOnlyItsPoint) {
  const auto dir = fresh_dir("workers-crash");
  const auto file = write_file(dir / "crash.yaml", R"(experiment: crash_pool
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: ok, task: echo, params: {sleep_us: 20000}, sweep: {value: [1, 2, 3, 4, 5, 6]}}
  - {name: dies, task: echo, params: {fail: crash}}
)");
  const auto r = run_runner(file.string() + " --device cpu --workers 2 --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::map<std::string, int> per_point;
  for (const auto& rec : report::read_result_lines(dir / "run" / "results.jsonl")) {
    ++per_point[rec["part"].get<std::string>() + std::to_string(rec["point"].get<int>())];
    if (rec["part"] == "dies") EXPECT_EQ(rec["status"], "error") << rec.dump();
    else EXPECT_EQ(rec["status"], "ok") << rec.dump();
  }
  EXPECT_EQ(per_point.size(), 7u) << r.output;
  for (const auto& [point, n] : per_point) EXPECT_EQ(n, 1) << point;
}

TEST(Workers, AResumedPoolRunsOnlyTheMissingPoints) {
  const auto dir = fresh_dir("workers-resume");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto run = dir / "run";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set sweep.value=[1,2,3] --workers 2 --out " + run.string())
                .exit_code, 0);
  // The last point's records cut off, as by a kill before it was appended.
  std::string text = read_file(run / "results.jsonl");
  for (int line = 0; line < 2; ++line) text.erase(text.rfind('\n', text.size() - 2) + 1);
  write_file(run / "results.jsonl", text);
  const auto resumed = run_runner(file.string() + " --device cpu --set sweep.value=[1,2,3] --workers 2 --resume " +
                                  run.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("[1/1] main"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("[2/1]"), std::string::npos) << "an earlier spool was read again\n" << resumed.output;
  std::map<int, int> per_point;
  for (const auto& r : report::read_result_lines(run / "results.jsonl")) ++per_point[r["point"].get<int>()];
  EXPECT_EQ(per_point.size(), 6u);
  for (const auto& [point, n] : per_point) EXPECT_EQ(n, 2) << "point " << point;  // two labels each
}

TEST(Workers, BadPoolFlagsAreRefused) {
  const auto dir = fresh_dir("workers-bad");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto zero = run_runner(file.string() + " --device cpu --workers 0 --out " + (dir / "a").string());
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("--workers 0: expected 1 to 256"), std::string::npos) << zero.output;
  const auto gpus = run_runner(file.string() + " --device cpu --gpus all --out " + (dir / "b").string());
  EXPECT_EQ(gpus.exit_code, 2);
  EXPECT_NE(gpus.output.find("--gpus all: the run is on cpu; use --workers N"), std::string::npos) << gpus.output;
}

}  // namespace
}  // namespace runner
