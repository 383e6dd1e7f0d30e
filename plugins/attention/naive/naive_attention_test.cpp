#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ops/scaled_dot_product_attention.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "naive_attention.hpp"
#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/range.hpp"
#include "config/validate.hpp"

namespace {

using plugins::naive_attention::NaiveAttention;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / b.norm().item<double>();
}

struct Inputs {
  torch::Tensor q, k, v;
};

// Double precision so that the comparison measures the formula, not rounding.
Inputs random_inputs(std::uint64_t seed, std::vector<std::int64_t> q_shape, std::int64_t key_len) {
  torch::manual_seed(seed);
  std::vector<std::int64_t> kv_shape = q_shape;
  kv_shape[kv_shape.size() - 2] = key_len;
  auto opts = torch::TensorOptions().dtype(torch::kDouble).requires_grad(true);
  return {torch::randn(q_shape, opts), torch::randn(kv_shape, opts), torch::randn(kv_shape, opts)};
}

void expect_matches_sdpa(const Inputs& in, bool is_causal, std::uint64_t seed) {
  NaiveAttention naive;
  const auto mask = is_causal ? runner::AttentionMask::causal() : runner::AttentionMask::none();
  torch::Tensor out = naive.forward(in.q, in.k, in.v, mask);
  torch::Tensor grad_out = torch::randn_like(out);
  auto grads = torch::autograd::grad({out}, {in.q, in.k, in.v}, {grad_out});

  torch::Tensor ref = at::scaled_dot_product_attention(in.q, in.k, in.v, {}, 0.0, is_causal);
  auto ref_grads = torch::autograd::grad({ref}, {in.q, in.k, in.v}, {grad_out});

  SCOPED_TRACE("seed " + std::to_string(seed) + (is_causal ? " causal" : " not causal"));
  EXPECT_LT(relative_error(out, ref), 1e-12);
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) EXPECT_LT(relative_error(grads[i], ref_grads[i]), 1e-12) << names[i];
}

TEST(NaiveAttention, MatchesScaledDotProductAttentionWithoutMask) {
  expect_matches_sdpa(random_inputs(1, {2, 3, 17, 8}, 17), false, 1);
}

TEST(NaiveAttention, MatchesScaledDotProductAttentionCausal) {
  expect_matches_sdpa(random_inputs(2, {2, 3, 17, 8}, 17), true, 2);
}

TEST(NaiveAttention, CausalWithMoreKeysThanQueriesIsTopLeftAligned) {
  expect_matches_sdpa(random_inputs(3, {4, 5, 16}, 9), true, 3);
}

TEST(NaiveAttention, AcceptsInputsWithoutBatchDimensions) {
  expect_matches_sdpa(random_inputs(4, {11, 4}, 11), true, 4);
}

TEST(NaiveAttention, MatchesTheFormulaWrittenOut) {
  Inputs in = random_inputs(5, {3, 6, 5}, 6);
  NaiveAttention naive;
  torch::Tensor out = naive.forward(in.q, in.k, in.v, runner::AttentionMask::causal());
  torch::Tensor scores = torch::matmul(in.q, in.k.transpose(-2, -1)) / std::sqrt(5.0);
  torch::Tensor allowed = torch::ones({6, 6}, torch::kBool).tril();
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  torch::Tensor ref = torch::matmul(torch::softmax(scores, -1), in.v);
  EXPECT_LT(relative_error(out, ref), 1e-12);
}

TEST(NaiveAttention, FirstQueryAttendsOnlyToFirstKeyWhenCausal) {
  Inputs in = random_inputs(6, {1, 4, 3}, 4);
  torch::Tensor out = NaiveAttention().forward(in.q, in.k, in.v, runner::AttentionMask::causal());
  EXPECT_TRUE(torch::allclose(out.select(1, 0), in.v.select(1, 0)));
}

TEST(NaiveAttention, CachesTheCausalMaskPerShape) {
  NaiveAttention naive;
  const torch::Tensor& a = naive.hidden(runner::AttentionMask::causal(), 5, 7, torch::kCPU);
  const torch::Tensor& b = naive.hidden(runner::AttentionMask::causal(), 5, 7, torch::kCPU);
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(naive.hidden(runner::AttentionMask::causal(), 7, 5, torch::kCPU).is_same(a));
  EXPECT_EQ(a.sum().item<std::int64_t>(), 35 - 15);  // 5 rows keep 1..5 keys
}

// The sliding window by its definition: row i of the output is softmax over keys
// max(0, i - window + 1) .. i alone, computed one row at a time.
TEST(NaiveAttention, SlidingWindowSeesOnlyTheLastWindowKeys) {
  Inputs in = random_inputs(11, {2, 9, 5}, 9);
  const std::int64_t window = 3;
  const torch::Tensor out = NaiveAttention().forward(in.q, in.k, in.v, runner::AttentionMask::sliding_window(window));
  for (std::int64_t i = 0; i < 9; ++i) {
    const std::int64_t first = std::max<std::int64_t>(0, i - window + 1);
    const torch::Tensor k = in.k.narrow(1, first, i - first + 1), v = in.v.narrow(1, first, i - first + 1);
    const torch::Tensor s = at::matmul(in.q.narrow(1, i, 1), k.transpose(-2, -1)) / std::sqrt(5.0);
    EXPECT_TRUE(torch::allclose(out.narrow(1, i, 1), at::matmul(at::softmax(s, -1), v), 1e-12, 1e-12)) << "row " << i;
  }
  // A window as long as the sequence is the causal mask.
  EXPECT_TRUE(torch::equal(NaiveAttention().forward(in.q, in.k, in.v, runner::AttentionMask::sliding_window(9)),
                           NaiveAttention().forward(in.q, in.k, in.v, runner::AttentionMask::causal())));
}

TEST(NaiveAttention, CachesOneHiddenMaskPerWindow) {
  NaiveAttention naive;
  const torch::Tensor& a = naive.hidden(runner::AttentionMask::sliding_window(2), 5, 5, torch::kCPU);
  EXPECT_FALSE(a.is_same(naive.hidden(runner::AttentionMask::sliding_window(3), 5, 5, torch::kCPU)));
  EXPECT_FALSE(a.is_same(naive.hidden(runner::AttentionMask::causal(), 5, 5, torch::kCPU)));
  EXPECT_EQ(a.logical_not().sum().item<std::int64_t>(), 1 + 2 * 4);  // row 0 sees 1 key, rows 1..4 see 2
}

class RecordingListener : public runner::RangeListener {
 public:
  void range_push(const std::string& name) override { pushed.push_back(name); }
  void range_pop(const std::string&) override {}
  std::vector<std::string> pushed;
};

TEST(NaiveAttention, NamesItsThreeStepsAsRanges) {
  RecordingListener listener;
  runner::add_range_listener(&listener);
  Inputs in = random_inputs(7, {2, 4, 3}, 4);
  NaiveAttention().forward(in.q, in.k, in.v, runner::AttentionMask::causal());
  runner::remove_range_listener(&listener);
  EXPECT_EQ(listener.pushed, (std::vector<std::string>{"attention/scores", "attention/softmax",
                                                       "attention/weighted_sum"}));
}

TEST(NaiveAttention, MatchesFp64ReferenceOnCudaInFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Inputs in = random_inputs(9, {2, 4, 64, 32}, 64);
  const auto cuda_fp32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  torch::Tensor q = in.q.detach().to(cuda_fp32).requires_grad_(true);
  torch::Tensor k = in.k.detach().to(cuda_fp32).requires_grad_(true);
  torch::Tensor v = in.v.detach().to(cuda_fp32).requires_grad_(true);
  NaiveAttention naive;
  torch::Tensor out = naive.forward(q, k, v, runner::AttentionMask::causal());
  EXPECT_TRUE(naive.hidden(runner::AttentionMask::causal(), 64, 64, q.device()).is_cuda());
  torch::Tensor grad_out = torch::randn_like(in.q);
  out.backward(grad_out.to(cuda_fp32));
  torch::Tensor ref = at::scaled_dot_product_attention(in.q, in.k, in.v, {}, 0.0, true);
  ref.backward(grad_out);
  EXPECT_LT(relative_error(out.cpu().to(torch::kDouble), ref), 1e-5);
  EXPECT_LT(relative_error(q.grad().cpu().to(torch::kDouble), in.q.grad()), 1e-5);
  EXPECT_LT(relative_error(v.grad().cpu().to(torch::kDouble), in.v.grad()), 1e-5);
}

TEST(NaiveAttention, LoadsFromThePluginDirectory) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Attention, "naive");
  runner::Context ctx;
  ctx.plugins = &registry;
  std::unique_ptr<runner::Attention> attention = ctx.create<runner::Attention>(runner::PluginKind::Attention, params);
  Inputs in = random_inputs(8, {2, 5, 4}, 5);
  torch::Tensor ref = at::scaled_dot_product_attention(in.q, in.k, in.v, {}, 0.0, true);
  EXPECT_LT(relative_error(attention->forward(in.q, in.k, in.v, runner::AttentionMask::causal()), ref), 1e-12);
}

}  // namespace
