// task/allreduce_bench on Gloo ranks in one process: one timed all-reduce per step,
// bandwidths from the payload and the time (bus = algorithm x 2(n-1)/n, NCCL's
// convention), and a one-line refusal of what cannot run.
#include <mutex>

#include "gloo_ranks.hpp"
#include "task_harness.hpp"

namespace runner::testing {
namespace {

class AllreduceBench : public TaskTest {
 protected:
  // Rank 0's record of a run on `world_size` ranks.
  Record run_on(int world_size, const std::string& options) {
    Record rank0;
    std::mutex mutex;
    on_gloo_ranks(world_size, [&](const Distributed& dist) {
      Context ctx;
      ctx.dist = dist;
      ctx.measure.warmup_steps = 1;
      ctx.measure.measured_steps = 4;
      const Record r = run_task_once("allreduce_bench", options, ctx);
      std::lock_guard<std::mutex> lock(mutex);
      if (dist.rank == 0) rank0 = r;
    });
    return rank0;
  }
};

TEST_F(AllreduceBench, TimesEveryStepAndDerivesBandwidthsFromBytesAndTime) {
  for (int ranks : {2, 3}) {
    const Record r = run_on(ranks, "{size_mb: 0.004}");
    EXPECT_EQ(r.labels.at("processes"), std::to_string(ranks));
    EXPECT_EQ(r.labels.at("impl"), "runner");
    EXPECT_EQ(metric_number(r, "bytes"), 4000.0);  // 1000 floats
    const Stats& time = metric_stats(r, "time_ms");
    const Stats& algbw = metric_stats(r, "algbw_gbps");
    const Stats& busbw = metric_stats(r, "busbw_gbps");
    EXPECT_EQ(time.n, 4);
    EXPECT_GT(time.min, 0.0);
    // The slowest step has the lowest bandwidth.
    EXPECT_NEAR(algbw.min, 4000.0 / (time.max * 1e-3) / 1e9, 1e-9 * algbw.min);
    EXPECT_NEAR(busbw.mean / algbw.mean, 2.0 * (ranks - 1) / ranks, 1e-12);
  }
}

TEST_F(AllreduceBench, RefusesOneProcessAndNcclOnTheCpu) {
  EXPECT_THROW(
      {
        try {
          run_task_once("allreduce_bench", "{}");
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("needs 2 or more ranks"), std::string::npos) << e.what();
          throw;
        }
      },
      std::invalid_argument);
  EXPECT_THROW(run_on(2, "{backend: nccl}"), std::invalid_argument);
}

}  // namespace
}  // namespace runner::testing
