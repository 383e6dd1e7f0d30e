// Host side of multi-process runs without starting processes: launcher variables,
// Slurm host lists, and how rank 0 merges every rank's records.
#include <cstdlib>

#include <gtest/gtest.h>

#include "distributed/distributed.hpp"
#include "distributed/launch.hpp"
#include "config/validate.hpp"

namespace runner {
namespace {

// Sets variables for one test and restores the process environment afterwards.
class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& name : set_) unsetenv(name.c_str());
  }
  void set(const std::string& name, const std::string& value) {
    setenv(name.c_str(), value.c_str(), 1);
    set_.push_back(name);
  }
  void SetUp() override {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
                             "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
                             "RUNNER_AGENT_STORE", "TORCHELASTIC_USE_AGENT_STORE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                             "SLURM_NODEID", "SLURM_NNODES"})
      if (std::getenv(name)) GTEST_SKIP() << name << " is set in the test's environment";
  }
  std::vector<std::string> set_;
};

TEST(FirstSlurmHost, TakesTheFirstEntryOfARange) {
  EXPECT_EQ(first_slurm_host("node[03-05,9],gpu7"), "node03");
  EXPECT_EQ(first_slurm_host("gpu7,node[1-2]"), "gpu7");
  EXPECT_EQ(first_slurm_host("a[12]"), "a12");
  EXPECT_EQ(first_slurm_host("single"), "single");
}

TEST_F(EnvTest, NoLauncherVariablesMeanOneProcess) { EXPECT_FALSE(detect_launch_env().has_value()); }

TEST_F(EnvTest, ReadsTorchrunVariables) {
  set("RANK", "1"), set("WORLD_SIZE", "4"), set("LOCAL_RANK", "1"), set("MASTER_ADDR", "h0"), set("MASTER_PORT", "1234");
  const auto e = detect_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->master_addr, "h0");
  EXPECT_EQ(e->master_port, 1234);
  EXPECT_EQ(e->launcher, "torchrun");
  EXPECT_FALSE(e->agent_store);
}

TEST_F(EnvTest, ReadsSlurmVariables) {
  set("SLURM_PROCID", "3"), set("SLURM_NTASKS", "8"), set("SLURM_LOCALID", "1");
  set("SLURM_JOB_NODELIST", "gpu[10-11]"), set("SLURM_JOB_ID", "4242");
  const auto e = detect_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "gpu10");
  EXPECT_EQ(e->master_port, 29500 + 242);
  EXPECT_EQ(e->launcher, "srun");
}

TEST_F(EnvTest, ReadsTheNodeOfEachLauncher) {
  set("RANK", "3"), set("WORLD_SIZE", "4"), set("LOCAL_RANK", "1"), set("MASTER_ADDR", "h0"), set("MASTER_PORT", "1");
  set("GROUP_RANK", "1"), set("GROUP_WORLD_SIZE", "2");  // torchrun's and runner launch's
  auto e = detect_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->node_rank, 1);
  EXPECT_EQ(e->nodes, 2);
  const nlohmann::json p = placement_of(*e);
  EXPECT_EQ(p["rank"], 3);
  EXPECT_EQ(p["local_rank"], 1);
  EXPECT_EQ(p["node_rank"], 1);
  EXPECT_EQ(p["nodes"], 2);
  set("GROUP_RANK", "2");
  EXPECT_THROW(detect_launch_env(), ConfigError);  // node 2 of 2
}

TEST_F(EnvTest, ReadsTheSlurmNode) {
  set("SLURM_PROCID", "2"), set("SLURM_NTASKS", "4"), set("SLURM_LOCALID", "0"), set("SLURM_JOB_NODELIST", "n[0-1]");
  set("SLURM_NODEID", "1"), set("SLURM_NNODES", "2");
  const auto e = detect_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->node_rank, 1);
  EXPECT_EQ(e->nodes, 2);
}

std::string launch_error(const LaunchSpec& spec) {
  try {
    check_launch_spec(spec);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckLaunchSpec, NamesTheFlagThatIsWrong) {
  LaunchSpec spec;
  EXPECT_EQ(launch_error(spec), "");  // one node, a free port
  spec.nnodes = 2;
  EXPECT_NE(launch_error(spec).find("the same --master-port"), std::string::npos) << launch_error(spec);
  spec.master_port = 29400;
  EXPECT_EQ(launch_error(spec), "");
  spec.node_rank = 2;
  EXPECT_NE(launch_error(spec).find("--node-rank 2: must be in 0..1"), std::string::npos) << launch_error(spec);
  spec.node_rank = 0;
  spec.master_port = 70000;
  EXPECT_NE(launch_error(spec).find("--master-port 70000"), std::string::npos);
  spec.master_port = 1;
  spec.nproc = 0;
  EXPECT_NE(launch_error(spec).find("--nproc-per-node"), std::string::npos);
}

TEST_F(EnvTest, RankOutsideTheWorldIsAClearError) {
  set("RANK", "2"), set("WORLD_SIZE", "2"), set("MASTER_ADDR", "h"), set("MASTER_PORT", "1");
  EXPECT_THROW(
      {
        try {
          detect_launch_env();
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("rank 2 is not below the world size 2"), std::string::npos);
          throw;
        }
      },
      ConfigError);
}

TEST_F(EnvTest, MissingMasterAddressNamesTheVariable) {
  set("RANK", "0"), set("WORLD_SIZE", "2");
  try {
    detect_launch_env();
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR is not set"), std::string::npos) << e.what();
  }
}

TEST(CheckedBackend, RejectsUnknownNames) {
  EXPECT_EQ(checked_backend(""), "auto");
  EXPECT_EQ(checked_backend("nccl"), "nccl");
  EXPECT_THROW(checked_backend("mpi"), ConfigError);
}

nlohmann::json record(double step_ms, double bytes, double tokens_per_s, const std::string& status = "ok") {
  return {{"status", status},
          {"labels", nlohmann::json::object()},
          {"metrics",
           {{"step_ms", {{"unit", "ms"}, {"mean", step_ms}, {"median", step_ms}, {"min", step_ms}, {"max", step_ms}}},
            {"peak_memory_bytes", {{"unit", "bytes"}, {"value", bytes}}},
            {"tokens_per_s", {{"unit", "tokens/s"}, {"mean", tokens_per_s}}},
            {"loss_last", {{"unit", ""}, {"value", bytes / 1000}}}}}};
}

// Merged records as written to results.jsonl.
std::vector<nlohmann::json> merged_lines(const std::vector<std::vector<nlohmann::json>>& per_rank) {
  std::vector<std::vector<StoredRecord>> stored;
  for (const auto& rank : per_rank) {
    stored.emplace_back();
    for (const auto& line : rank) stored.back().push_back(decode_record(line));
  }
  std::vector<nlohmann::json> out;
  for (const StoredRecord& r : merge_rank_records(stored)) out.push_back(nlohmann::json::parse(record_line(r)));
  return out;
}

TEST(MergeRankRecords, KeepsEachRankAndAppendsTheSlowestRankAggregate) {
  const auto merged = merged_lines({{record(10, 100, 50)}, {record(12, 90, 40)}});
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0]["labels"]["rank"], "0");
  EXPECT_EQ(merged[1]["labels"]["rank"], "1");
  const auto& agg = merged[2];
  EXPECT_FALSE(agg["labels"].contains("rank"));
  EXPECT_EQ(agg["metrics"]["step_ms"]["mean"], 12.0);              // time: max
  EXPECT_EQ(agg["metrics"]["peak_memory_bytes"]["value"], 100.0);  // memory: max
  EXPECT_EQ(agg["metrics"]["tokens_per_s"]["mean"], 40.0);         // rate: min
  EXPECT_EQ(agg["metrics"]["loss_last"]["value"], 0.1);            // other: rank 0's
  EXPECT_EQ(agg["ranks"], 2);
}

TEST(MergeRankRecords, TheAggregateHasNoPlacement) {
  auto a = record(1, 1, 1), b = record(1, 1, 1);
  a["placement"] = {{"rank", 0}};
  b["placement"] = {{"rank", 1}};
  const auto merged = merged_lines({{a}, {b}});
  EXPECT_EQ(merged[1]["placement"]["rank"], 1);
  EXPECT_FALSE(merged.back().contains("placement"));
}

TEST(MergeRankRecords, AFailedRankFailsTheAggregate) {
  auto bad = record(1, 1, 1, "error");
  bad["error"] = "boom";
  const auto merged = merged_lines({{record(1, 1, 1)}, {bad}});
  EXPECT_EQ(merged.back()["status"], "error");
  EXPECT_EQ(merged.back()["error"], "rank 1: boom");
}

}  // namespace
}  // namespace runner
