// task/ddp_check on Gloo ranks in one process: a correct strategy matches
// single-process training within the tolerance on every rank, and a run whose
// training differs from the reference fails with the size of the difference.
// (The full matrix, every strategy on 2 and 4 launched processes, is the ctest
// ddp_check.gloo_<n>_ranks_match_single_process in this folder's CMakeLists.txt.)
#include <mutex>

#include "gloo_ranks.hpp"
#include "task_harness.hpp"

namespace runner::testing {
namespace {

class DdpCheck : public TaskTest {
 protected:
  // Every rank's record of a run on `world_size` ranks, in rank order.
  std::vector<Record> run_on(int world_size, const std::string& options) {
    std::vector<Record> records(static_cast<size_t>(world_size));
    on_gloo_ranks(world_size, [&](const Distributed& dist) {
      Context ctx;
      ctx.dist = dist;
      records[static_cast<size_t>(dist.rank)] = run_task_once("ddp_check", options, ctx);
    });
    return records;
  }
};

TEST_F(DdpCheck, ACorrectStrategyMatchesSingleProcessTrainingOnEveryRank) {
  for (const Record& r : run_on(2, "{ddp: naive, batch_size: 8, steps: 2, micro_batches: 2}")) {
    EXPECT_LE(metric_number(r, "relative_error"), 1e-6);
    EXPECT_LE(metric_number(r, "relative_error"), metric_number(r, "max_parameter_relative_error"));
    EXPECT_EQ(metric_number(r, "ranks"), 2.0);
    EXPECT_FALSE(metric_text(r, "worst_parameter").empty());
  }
}

TEST_F(DdpCheck, ShardedStateIsSmallerThanTheReferences) {
  const auto records =
      run_on(2, "{ddp: flat, optimizer: {name: sharded, inner: adamw}, reference_optimizer: adamw, batch_size: 8, "
                "steps: 2}");
  for (const Record& r : records)
    EXPECT_LT(metric_number(r, "optimizer_state_bytes"), metric_number(r, "reference_optimizer_state_bytes"));
}

TEST_F(DdpCheck, TrainingThatDiffersFromTheReferenceFailsWithTheDifference) {
  try {
    run_on(2, "{ddp: naive, optimizer: {name: sgd, lr: 0.0011}, batch_size: 8, steps: 2}");
    FAIL() << "a 10% larger learning rate passed the check";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("weights differ from single-process training by"), std::string::npos)
        << e.what();
  }
}

TEST_F(DdpCheck, ABatchThatDoesNotSplitOverRanksIsRefused) {
  EXPECT_THROW(run_on(2, "{ddp: naive, batch_size: 9}"), std::invalid_argument);
}

}  // namespace
}  // namespace runner::testing
