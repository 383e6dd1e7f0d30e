#include <gtest/gtest.h>

#include <cmath>

#include <torch/cuda.h>

#include "task_harness.hpp"

namespace {

// A model small enough for CPU: 2 layers, d_model 32, context 16, vocabulary 256.
constexpr const char* kTinyModel =
    "model: {name: transformer_lm, size: custom, d_model: 32, d_ff: 64, num_layers: 2, num_heads: 2,"
    " context_length: 16, vocab_size: 256}, batch_size: 2";

class TrainStepTest : public runner::testing::TaskTest {
 protected:
  runner::Record run(const std::string& options, const std::string& precision = "fp32", int measured_steps = 2,
                     int warmup_steps = 1, c10::Device device = c10::kCPU) {
    runner::Context ctx;
    ctx.device = device;
    ctx.precision = runner::Precision::parse(precision);
    ctx.measure.warmup_steps = warmup_steps;
    ctx.measure.measured_steps = measured_steps;
    return run_task_once("train_step", "{" + std::string(kTinyModel) + ", " + options + "}", ctx);
  }
  static double scalar(const runner::Record& r, const std::string& name) {
    return runner::testing::metric_number(r, name);
  }
};

TEST_F(TrainStepTest, ForwardModeTimesOnlyTheForward) {
  const auto r = run("mode: forward");
  EXPECT_NE(r.find("forward_ms"), nullptr);
  EXPECT_EQ(r.find("backward_ms"), nullptr);
  EXPECT_EQ(r.find("optimizer_ms"), nullptr);
  EXPECT_EQ(std::get<runner::Stats>(r.find("step_ms")->value).n, 2);
}

TEST_F(TrainStepTest, ForwardBackwardModeAddsBackward) {
  const auto r = run("mode: forward_backward");
  EXPECT_NE(r.find("forward_ms"), nullptr);
  EXPECT_NE(r.find("backward_ms"), nullptr);
  EXPECT_EQ(r.find("optimizer_ms"), nullptr);
}

TEST_F(TrainStepTest, TrainStepModeTimesAllThreePhasesAndCountsParameters) {
  const auto r = run("mode: train_step");
  for (const char* phase : {"forward_ms", "backward_ms", "optimizer_ms", "step_ms", "tokens_per_s"})
    EXPECT_NE(r.find(phase), nullptr) << phase;
  // 2 x 256 x 32 (embedding, head) + 2 x (4 x 32^2 + 3 x 32 x 64 + 2 x 32) + 32 (final norm)
  EXPECT_DOUBLE_EQ(scalar(r, "parameters"), 2 * 256 * 32 + 2 * (4 * 32 * 32 + 3 * 32 * 64 + 2 * 32) + 32);
  EXPECT_EQ(r.find("peak_memory_bytes"), nullptr) << "CPU has no allocator statistics";
}

TEST_F(TrainStepTest, RepeatedTrainStepsOnOneBatchLowerTheLoss) {
  const auto r = run("mode: train_step, optimizer: {name: adamw, lr: 0.01}", "fp32", 5);
  EXPECT_LT(scalar(r, "loss_last"), scalar(r, "loss_first"));
}

TEST_F(TrainStepTest, ForwardBackwardWithoutOptimizerLeavesTheLoss) {
  const auto r = run("mode: forward_backward");
  EXPECT_DOUBLE_EQ(scalar(r, "loss_last"), scalar(r, "loss_first"));
}

TEST_F(TrainStepTest, Bf16AutocastStepRunsOnCpu) {
  const auto r = run("mode: train_step", "bf16");
  EXPECT_TRUE(std::isfinite(scalar(r, "loss_last")));
  EXPECT_GT(std::get<runner::Stats>(r.find("backward_ms")->value).mean, 0.0);
}

TEST_F(TrainStepTest, CudaGraphOnCpuRunsTheEagerStep) {
  const auto r = run("mode: train_step, cuda_graph: true, optimizer: {name: adamw, impl: fused}");
  EXPECT_NE(r.find("forward_ms"), nullptr);
  EXPECT_EQ(r.find("graph_ms"), nullptr);
}

TEST_F(TrainStepTest, CudaGraphNeedsACapturableOptimizer) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(run("mode: train_step, cuda_graph: true, optimizer: adamw", "fp32", 2, 1, c10::kCUDA),
               std::invalid_argument);
}

// The graph's first step runs 2 eager steps before capturing and replaying, so a
// graphed run with 1 warm-up step has taken as many steps as an eager run with 3.
TEST_F(TrainStepTest, CudaGraphStepLosesLikeTheEagerStep) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string precision : {"fp32", "bf16"}) {
    const std::string options = "mode: train_step, optimizer: {name: adamw, impl: fused, lr: 0.01}";
    const auto eager = run(options, precision, 4, 3, c10::kCUDA);
    const auto graphed = run(options + ", cuda_graph: true", precision, 4, 1, c10::kCUDA);
    EXPECT_NE(graphed.find("graph_ms"), nullptr);
    EXPECT_EQ(graphed.find("forward_ms"), nullptr);
    EXPECT_DOUBLE_EQ(scalar(graphed, "loss_first"), scalar(eager, "loss_first")) << precision;
    const double tol = precision == "fp32" ? 1e-4 : 1e-3;  // same kernels; atomics may reorder sums
    EXPECT_NEAR(scalar(graphed, "loss_last"), scalar(eager, "loss_last"), tol * scalar(eager, "loss_last"))
        << precision;
    EXPECT_LT(scalar(graphed, "loss_last"), scalar(graphed, "loss_first")) << precision;
  }
}

// The fast path (fused kernels: residual add + RMSNorm, working bf16 weight copies rewritten by
// the fused AdamW; SDPA; one CUDA graph) against the naive path (tensor ops, naive attention,
// foreach AdamW) over ten bf16 steps from the same weights: losses within 1e-2 relative.
TEST_F(TrainStepTest, FastPathTracksTheNaivePathOverTenBf16Steps) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto naive = run("mode: train_step, optimizer: {name: adamw, lr: 0.01}", "bf16", 7, 3, c10::kCUDA);
  runner::Context ctx;
  ctx.device = c10::kCUDA;
  ctx.precision = runner::Precision::parse("bf16");
  ctx.measure.warmup_steps = 1;  // + the graph's 2 eager steps before capture
  ctx.measure.measured_steps = 7;
  std::string fast_model = kTinyModel;
  fast_model.replace(fast_model.find("vocab_size: 256}"), 16, "vocab_size: 256, fused_kernels: true, attention: sdpa}");
  const auto fast = run_task_once(
      "train_step",
      "{" + fast_model + ", mode: train_step, optimizer: {name: adamw, impl: fused, lr: 0.01}, cuda_graph: true}", ctx);
  for (const std::string key : {"loss_first", "loss_last"})
    EXPECT_NEAR(scalar(fast, key), scalar(naive, key), 1e-2 * scalar(naive, key)) << key;
  EXPECT_LT(scalar(fast, "loss_last"), 0.9 * scalar(fast, "loss_first"));
}

TEST_F(TrainStepTest, CudaGraphForwardOnlyMatchesEager) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto eager = run("mode: forward", "bf16", 2, 1, c10::kCUDA);
  const auto graphed = run("mode: forward, cuda_graph: true", "bf16", 2, 1, c10::kCUDA);
  EXPECT_DOUBLE_EQ(scalar(graphed, "loss_last"), scalar(eager, "loss_last"));
}

}  // namespace
