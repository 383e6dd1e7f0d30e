// Profilers' own records (Profiler::emit_records) and the `profilers` field: the
// host appends a profiler's records after the task's, labelled profiler=<name>,
// without the summary, only for points that succeeded; every record names the
// profilers that ran with the host time of their hooks.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::run_runner;
using testing::write_file;

std::vector<nlohmann::json> records_of(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir / "results.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(ProfilerRecords, AppendedAfterTheTaskLabelledAndListedInEveryRecord) {
  const auto dir = fresh_dir("profiler-records");
  const auto yaml = write_file(dir / "x.yaml", R"(experiment: profiler_records
measure: {warmup_steps: 2, measured_steps: 2}
profilers: [{name: kernels, trace: false, top_k: 3}]
task: train_step
params:
  model: {name: transformer_lm, size: custom, d_model: 32, d_ff: 64, num_layers: 1, num_heads: 2, vocab_size: 64,
          context_length: 8}
  batch_size: 2
  mode: forward
)");
  const auto r = run_runner(yaml.string() + " --device cpu --history off --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = records_of(dir / "run");
  ASSERT_GT(records.size(), 3u);
  EXPECT_FALSE(records[0]["labels"].contains("profiler")) << "the task's record comes first";
  EXPECT_TRUE(records[0]["metrics"].contains("forward_ms"));
  std::size_t own = 0;
  for (const auto& rec : records) {
    ASSERT_TRUE(rec.contains("profilers")) << rec.dump();
    ASSERT_EQ(rec["profilers"].size(), 1u);
    EXPECT_EQ(rec["profilers"][0]["name"], "kernels");
    EXPECT_GE(rec["profilers"][0]["hook_ms"].get<double>(), 0.0);
    if (rec["labels"].value("profiler", "") != "kernels") continue;
    ++own;
    EXPECT_EQ(rec["status"], "ok");
    EXPECT_TRUE(rec["labels"].contains("table"));
    EXPECT_FALSE(rec["metrics"].contains("forward_ms")) << "a profiler's records do not get the task's metrics";
  }
  EXPECT_EQ(own + 1, records.size());
}

TEST(ProfilerRecords, AFailedPointKeepsOneRecordWithoutProfilerRecords) {
  const auto dir = fresh_dir("profiler-records-fail");
  const auto yaml = write_file(dir / "x.yaml", R"(experiment: profiler_records_fail
profilers: [{name: kernels, trace: false}]
task: echo
params: {fail: error}
)");
  const auto r = run_runner(yaml.string() + " --device cpu --history off --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto records = records_of(dir / "run");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "error");
  EXPECT_EQ(records[0]["profilers"][0]["name"], "kernels");
}

}  // namespace
}  // namespace runner
