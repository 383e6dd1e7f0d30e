// A multi-process run killed mid-sweep resumes: `runner launch ... --resume RUN`
// runs on every rank only the points rank 0 has no finished record of.
#include <gtest/gtest.h>

#include <map>

#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

TEST(LaunchResume, KilledTwoRankGlooRunResumesAndCompletes) {
  const auto dir = fresh_dir("launch-resume");
  const auto file = write_file(dir / "two.yaml", R"(experiment: two_ranks
processes: 2
device: cpu
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
params: {sleep_us: 700000}
sweep: {value: [1, 2, 3, 4, 5, 6, 7, 8]}
)");
  const auto run = dir / "run";
  const std::string launch = std::string(RUNNER_EXE) + " launch --nproc-per-node 2 " + file.string();
  // SIGTERM to the launcher once the first point is recorded (as a scheduler's kill).
  run_runner("", launch + " --out " + run.string() + " & pid=$!; for i in $(seq 900); do [ -s " +
                     (run / "results.jsonl").string() + " ] && break; sleep 0.1; done; sleep 0.3; kill -TERM $pid; "
                     "wait $pid; exit 0;");
  const auto finished_per_point = [&] {
    std::map<int, int> groups;
    for (const auto& r : report::read_result_lines(run / "results.jsonl"))
      if (r["status"] != "interrupted" && r["point_record"][0] == 1) ++groups[r["point"].get<int>()];
    return groups;
  };
  const auto before = finished_per_point();
  ASSERT_GE(before.size(), 1u);
  ASSERT_LT(before.size(), 8u) << "the kill came after the sweep finished";
  const std::string log = read_file(run / "log.txt");
  EXPECT_NE(log.find("continue with: runner launch --nproc-per-node 2 "), std::string::npos) << log;

  const auto resumed = run_runner("launch --nproc-per-node 2 " + file.string() + " --resume " + run.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = finished_per_point();
  EXPECT_EQ(after.size(), 8u);
  for (const auto& [point, n] : after) EXPECT_EQ(n, 1) << "point " << point << " recorded " << n << " times";
  // Both ranks ran the resumed points: their records carry both ranks' placements.
  EXPECT_NE(read_file(run / "results.jsonl").find("\"rank\":1"), std::string::npos);
  EXPECT_NE(read_file(run / "log.txt").find("resumed two_ranks"), std::string::npos);
}

}  // namespace
}  // namespace runner
