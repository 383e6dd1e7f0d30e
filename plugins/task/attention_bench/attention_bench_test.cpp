#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "task_harness.hpp"

namespace {

using runner::testing::metric_number;
using runner::testing::metric_stats;
using runner::testing::metric_text;

class AttentionBenchTest : public runner::testing::TaskTest {
 protected:
  runner::Context context(c10::Device device = c10::kCPU) {
    runner::Context ctx;
    ctx.device = device;
    ctx.measure.warmup_steps = 1;
    ctx.measure.measured_steps = 3;
    return ctx;
  }
};

TEST_F(AttentionBenchTest, TimesForwardAndBackwardOfNaiveOnCpu) {
  const auto r = run_task_once("attention_bench", "{batch: 2, seq: 64, d_head: 16, causal: true}", context());
  EXPECT_EQ(metric_stats(r, "forward_ms").n, 3);
  EXPECT_EQ(metric_stats(r, "backward_ms").n, 3);
  EXPECT_GT(metric_number(r, "fwd_bwd_tflops"), 0.0);
  // Naive saves the softmax output: 2 x 64 x 64 fp32 values.
  EXPECT_DOUBLE_EQ(metric_number(r, "analytic_attention_matrix_bytes"), 2.0 * 64 * 64 * 4);
  EXPECT_EQ(metric_text(r, "mechanism"), "naive, eager launches");
}

TEST_F(AttentionBenchTest, RunsTheTiledVariantWithHeads) {
  const auto r = run_task_once(
      "attention_bench", "{attention: {name: flash_tiled, tile_q: 16, tile_k: 32}, batch: 1, heads: 2, seq: 40, d_head: 32}",
      context());
  EXPECT_GT(metric_stats(r, "forward_ms").median, 0.0);
  EXPECT_EQ(metric_text(r, "mechanism"), "tensor ops, tiles 16x32, eager launches");
}

TEST_F(AttentionBenchTest, CudaGraphNeedsCuda) {
  EXPECT_THROW(run_task_once("attention_bench", "{seq: 16, d_head: 16, execution: cuda_graph}", context()),
               std::invalid_argument);
}

TEST_F(AttentionBenchTest, CudaGraphReplaysForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* variant : {"naive", "sdpa", "flash"}) {
    const auto r = run_task_once("attention_bench",
                                 std::string("{attention: ") + variant +
                                     ", batch: 1, heads: 2, seq: 256, d_head: 64, dtype: bf16, causal: true, "
                                     "execution: cuda_graph}",
                                 context(c10::Device(c10::kCUDA)));
    EXPECT_GT(metric_stats(r, "forward_backward_ms").median, 0.0) << variant;
    EXPECT_NE(metric_text(r, "mechanism").find("CUDA graph"), std::string::npos) << variant;
  }
}

}  // namespace

namespace {

class AttentionBenchCheck : public runner::testing::TaskTest {};

TEST_F(AttentionBenchCheck, RecordsErrorsAgainstNaive) {
  runner::Context ctx;
  ctx.measure.warmup_steps = 0;
  ctx.measure.measured_steps = 1;
  const auto r = run_task_once("attention_bench",
                               "{attention: flash_tiled, batch: 1, heads: 2, seq: 45, d_head: 16, causal: true, "
                               "check_against_naive: true}",
                               ctx);
  EXPECT_LT(runner::testing::metric_number(r, "error_max"), 1e-5);
  EXPECT_GT(runner::testing::metric_number(r, "error_dq"), 0.0);  // a real comparison, not a copy
}

}  // namespace

namespace {

class AttentionBenchAnalytic : public runner::testing::TaskTest {};

TEST_F(AttentionBenchAnalytic, AnalyticOnlyAllocatesNothingAndCountsTheMatrices) {
  // batch 8, seq 32768, d 16, fp32: one 8 x 32768^2 matrix is 32 GiB.
  const auto r = run_task_once("attention_bench", "{batch: 8, seq: 32768, d_head: 16, analytic_only: true}");
  EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "analytic_attention_matrix_gib"), 32.0);
  const double vec_gib = 8.0 * 32768 * 16 * 4 / (1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(runner::testing::metric_number(r, "analytic_naive_forward_peak_gib"), 3 * 32.0 + 3 * vec_gib);
  EXPECT_EQ(r.find("forward_ms"), nullptr);
}

}  // namespace
