#include <gtest/gtest.h>

#include "task_harness.hpp"

namespace {

constexpr const char* kTinyModel =
    "model: {name: transformer_lm, size: custom, d_model: 32, d_ff: 64, num_layers: 2, num_heads: 2,"
    " context_length: 16, vocab_size: 256}";

class OptimizerStepTest : public runner::testing::TaskTest {
 protected:
  runner::Record run(const std::string& options) {
    runner::Context ctx;
    ctx.measure.warmup_steps = 1;
    ctx.measure.measured_steps = 3;
    return run_task_once("optimizer_step", "{" + std::string(kTinyModel) + ", " + options + "}", ctx);
  }
};

TEST_F(OptimizerStepTest, ReportsTimeBandwidthAndTheFloorFromTheParameterCount) {
  for (const std::string impl : {"foreach", "fused"}) {
    const auto r = run("optimizer: {name: adamw, impl: " + impl + "}, floor_bandwidth_gbs: 1000");
    const double params = runner::testing::metric_number(r, "parameters");
    EXPECT_DOUBLE_EQ(params, 2 * 256 * 32 + 2 * (4 * 32 * 32 + 3 * 32 * 64 + 2 * 32) + 32);
    EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "bytes_moved"), 28 * params);
    EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "floor_ms"), 28 * params / 1e12 * 1e3);
    EXPECT_EQ(runner::testing::metric_stats(r, "optimizer_ms").n, 3);
    EXPECT_GT(runner::testing::metric_stats(r, "gbps").mean, 0.0);
    EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "floor_gbps"), 1000);
  }
}

TEST_F(OptimizerStepTest, WithoutADeclaredBandwidthTheFloorIsTheMeasuredCopyBandwidth) {
  const auto r = run("optimizer: {name: adamw, impl: fused}, copy_mib: 8");
  const double gbps = runner::testing::metric_number(r, "floor_gbps");
  EXPECT_GT(gbps, 0.0);
  EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "floor_ms"),
                   runner::testing::metric_number(r, "bytes_moved") / (gbps * 1e9) * 1e3);
}

TEST_F(OptimizerStepTest, Bf16GradientsAreAccepted) {
  const auto r = run("optimizer: {name: adamw, impl: fused}, grad_dtype: bf16, bytes_per_param: 26");
  EXPECT_GT(runner::testing::metric_stats(r, "optimizer_ms").mean, 0.0);
}

}  // namespace
