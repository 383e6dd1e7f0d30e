#include <gtest/gtest.h>

#include <string>

#include "task_harness.hpp"
#include "xxl_formulas.hpp"

namespace {

using plugins::communication_accounting::FfnStack;
using plugins::communication_accounting::Mesh;
using plugins::communication_accounting::fsdp_bytes_per_device;
using plugins::communication_accounting::smallest_fsdp_devices;
using runner::testing::metric_number;
using runner::testing::metric_text;

// d_model 2, d_ff 3, 2 blocks: P = 2 blocks x 2 layers... = 2 x 2 x 2 x 3 = 24 parameters.
FfnStack tiny_stack() {
  FfnStack s;
  s.d_model = 2;
  s.d_ff = 3;
  s.blocks = 2;
  return s;
}

TEST(FfnStackMemory, SixteenBytesPerParameterAndTwoPerSavedInput) {
  const FfnStack s = tiny_stack();
  EXPECT_DOUBLE_EQ(s.parameters(), 24.0);
  EXPECT_DOUBLE_EQ(s.weights(), 96.0);          // 24 x 4
  EXPECT_DOUBLE_EQ(s.gradients(), 96.0);        // 24 x 4
  EXPECT_DOUBLE_EQ(s.optimizer_state(), 192.0); // 24 x 8
  EXPECT_DOUBLE_EQ(s.model_state(), 384.0);
  // Per token: 2 blocks x (2 + 3) inputs x 2 B = 20 B.
  EXPECT_DOUBLE_EQ(s.activations_per_token(), 20.0);
}

TEST(FfnStackMemory, FsdpShardsStateAndHalfTheActivations) {
  const FfnStack s = tiny_stack();
  // 10 tokens: 200 B of activations. N = 4: (384 + 100) / 4 + 100 = 221 B.
  EXPECT_DOUBLE_EQ(fsdp_bytes_per_device(s, 10, 0.5, 4), 221.0);
  EXPECT_DOUBLE_EQ(fsdp_bytes_per_device(s, 10, 0.5, 1), 584.0);  // everything on one device
  // Under 150 B: room 150 - 100 = 50 for 484 B shardable, n > 9.68. n = 10 gives 148.4 B, n = 9 153.8 B.
  EXPECT_EQ(smallest_fsdp_devices(s, 10, 0.5, 150.0), 10);
  // Exactly on the limit is not under it: 384 / n < 96 needs n = 5 (n = 4 gives 96).
  EXPECT_EQ(smallest_fsdp_devices(s, 0, 0.5, 96.0), 5);
  // The unsharded half (100 B) alone does not fit 100 B: no n works.
  EXPECT_EQ(smallest_fsdp_devices(s, 10, 0.5, 100.0), 0);
}

TEST(FfnStackMemory, TheSpecsXxlConfiguration) {
  FfnStack s;
  s.d_model = 16384;
  s.d_ff = 53248;
  s.blocks = 126;
  // 2 x 126 x 16384 x 53248
  EXPECT_DOUBLE_EQ(s.parameters(), 219848638464.0);
  EXPECT_NEAR(s.model_state() / 1e9, 3517.578, 1e-3);  // 16 B each
  // 3517.6 GB / 95 GB = 37.03, so 38 devices without activations.
  EXPECT_EQ(smallest_fsdp_devices(s, 0, 0.5, 95e9), 38);
  // 126 x (16384 + 53248) x 2 B = 17,547,264 B per token.
  EXPECT_DOUBLE_EQ(s.activations_per_token(), 17547264.0);
}

// C = 100 FLOP/s, W = 10 B/s: alpha = 10. X = 4, Y = 2, M_X = 2, M_Y = 1, bf16.
Mesh tiny_mesh() {
  Mesh m;
  m.chip_flops = 100;
  m.ici_bandwidth = 10;
  m.x = 4;
  m.y = 2;
  m.axes_x = 2;
  m.axes_y = 1;
  return m;
}

TEST(ComputeBoundBatch, FsdpThresholdAndTpLimit) {
  const Mesh m = tiny_mesh();
  EXPECT_DOUBLE_EQ(m.alpha(), 10.0);
  EXPECT_EQ(m.chips(), 8);
  EXPECT_DOUBLE_EQ(m.fsdp_tokens_per_chip(), 2.5);  // 10 / (2 x 2)
  // F = 30: Y <= 30 x 1 / 10 = 3.
  EXPECT_DOUBLE_EQ(m.max_tp_degree(30), 3.0);
  EXPECT_TRUE(m.tp_compute_bound(30));
  EXPECT_FALSE(m.tp_compute_bound(10));  // Y = 2 > 1
  // alpha^2 / (M_X M_Y F) = 100 / 60
  EXPECT_DOUBLE_EQ(m.best_tokens_per_chip(30), 100.0 / 60.0);
}

TEST(ComputeBoundBatch, AtTheThresholdComputeEqualsTheWeightGather) {
  const Mesh m = tiny_mesh();
  // B = 2.5 x 8 = 20 tokens, D = 5, F = 30: T_math = 4 x 20 x 5 x 30 / (8 x 100) = 15 s;
  // T_fsdp = 2 x 5 x 30 x 2 / 2 / (10 x 2) = 15 s; T_tp = 2 x 20 x 5 x 2 / 4 / 10 = 10 s.
  EXPECT_DOUBLE_EQ(m.math_seconds(20, 5, 30), 15.0);
  EXPECT_DOUBLE_EQ(m.fsdp_seconds(5, 30), 15.0);
  EXPECT_DOUBLE_EQ(m.tp_seconds(20, 5), 10.0);
}

TEST(ComputeBoundBatch, OneByteWeightsHalveTheBatch) {
  Mesh m = tiny_mesh();
  m.weight_comm_bytes = 1;
  EXPECT_DOUBLE_EQ(m.fsdp_tokens_per_chip(), 1.25);
  m.activation_comm_bytes = 1;
  EXPECT_DOUBLE_EQ(m.max_tp_degree(30), 6.0);
}

class CommunicationAccountingTask : public runner::testing::TaskTest {};

TEST_F(CommunicationAccountingTask, SpecMeshNeeds320TokensPerChip) {
  // alpha = 4.6e14 / 1.8e11 = 2555.6; B/N >= 2555.6 / (4 x 2) = 319.4 -> 320; B = 320 x 64.
  const auto r = run_task_once("communication_accounting", "{quantity: compute_bound_batch}");
  EXPECT_NEAR(metric_number(r, "fsdp_tokens_per_chip"), 319.444, 1e-3);
  EXPECT_DOUBLE_EQ(metric_number(r, "tokens_per_chip"), 320.0);
  EXPECT_DOUBLE_EQ(metric_number(r, "global_batch"), 20480.0);
  EXPECT_EQ(metric_text(r, "tp_compute_bound"), "yes");
}

TEST_F(CommunicationAccountingTask, TooMuchTensorParallelismIsNeverComputeBound) {
  // Y = 32 > F / alpha = 53248 / 2555.6 = 20.8.
  const auto r = run_task_once("communication_accounting", "{quantity: compute_bound_batch, mesh_x: 2, mesh_y: 32}");
  EXPECT_EQ(metric_text(r, "tp_compute_bound"), "no");
  EXPECT_EQ(metric_text(r, "global_batch"), "never (TP-bound)");
}

TEST_F(CommunicationAccountingTask, XxlOnOneDeviceIs44H100s) {
  const auto r = run_task_once("communication_accounting", "{quantity: memory}");
  EXPECT_NEAR(metric_number(r, "model_state_gb"), 3517.578, 1e-3);
  EXPECT_DOUBLE_EQ(metric_number(r, "devices_to_hold"), 44.0);  // 3517.6 / 80 = 43.97
  EXPECT_EQ(metric_text(r, "fits"), "no");
}

TEST_F(CommunicationAccountingTask, FsdpOverTheSmallestDeviceCountFits) {
  const auto r = run_task_once("communication_accounting",
                               "{quantity: memory, device_memory_gb: 95, devices: 38, tokens: 0}");
  EXPECT_DOUBLE_EQ(metric_number(r, "smallest_devices"), 38.0);
  EXPECT_NEAR(metric_number(r, "per_device_gb"), 3517.578 / 38, 1e-3);
  EXPECT_EQ(metric_text(r, "fits"), "yes");
}

}  // namespace
