#include <cmath>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "rope/rope.hpp"

namespace {

using kernels::rope::rope_qk;
using kernels::rope::rope_reference;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() / b.to(torch::kDouble).norm().item<double>();
}

// cos/sin tables [seq, d_head / 2] for theta 10000, as model/transformer_lm builds them.
std::pair<torch::Tensor, torch::Tensor> tables(std::int64_t seq, std::int64_t d_head, torch::Device device) {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const auto inv_freq = torch::pow(10000.0, -torch::arange(0, d_head, 2, f64) / static_cast<double>(d_head));
  const auto angles = torch::outer(torch::arange(seq, f64), inv_freq);
  return {angles.cos().to(torch::kFloat).to(device), angles.sin().to(torch::kFloat).to(device)};
}

TEST(RopeReference, RotatesEachPairByPositionTimesFrequency) {
  torch::manual_seed(0);
  const std::int64_t B = 2, T = 5, H = 3, D = 8;
  const auto x = torch::randn({B, T, H, D});
  auto [cos, sin] = tables(T, D, torch::kCPU);
  const auto y = rope_reference(x, cos, sin);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = t * std::pow(10000.0, -2.0 * i / D);
      const double e = x[1][t][2][2 * i].item<double>(), o = x[1][t][2][2 * i + 1].item<double>();
      EXPECT_NEAR(y[1][t][2][2 * i].item<double>(), e * std::cos(angle) - o * std::sin(angle), 1e-5);
      EXPECT_NEAR(y[1][t][2][2 * i + 1].item<double>(), e * std::sin(angle) + o * std::cos(angle), 1e-5);
    }
  }
  // A rotation keeps each pair's length.
  EXPECT_LT(relative_error(y.pow(2).unflatten(-1, {D / 2, 2}).sum(-1), x.pow(2).unflatten(-1, {D / 2, 2}).sum(-1)), 1e-6);
}

TEST(RopeReference, CpuTensorsTakeTheReferenceAndShapesAreChecked) {
  const auto q = torch::randn({1, 4, 2, 6}), k = torch::randn({1, 4, 2, 6});
  auto [cos, sin] = tables(4, 6, torch::kCPU);
  auto [qr, kr] = rope_qk(q, k, cos, sin);
  EXPECT_TRUE(torch::equal(qr, rope_reference(q, cos, sin)));
  EXPECT_TRUE(torch::equal(kr, rope_reference(k, cos, sin)));
  EXPECT_THROW(rope_qk(q, torch::randn({1, 4, 2, 4}), cos, sin), std::invalid_argument);
  EXPECT_THROW(rope_qk(torch::randn({1, 9, 2, 6}), torch::randn({1, 9, 2, 6}), cos, sin), std::invalid_argument);
}

TEST(RopeKernel, MatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(1);
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{4, 256, 12, 64}, {2, 16, 25, 64}, {1, 3, 2, 80}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::to_string(shape[2]) + " heads " + std::string(c10::toString(dtype)));
      auto [cos, sin] = tables(shape[1] + 7, shape[3], torch::kCUDA);  // tables longer than seq
      const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
      const auto q = torch::randn(shape, opts), k = torch::randn(shape, opts);
      const auto gq = torch::randn(shape, opts), gk = torch::randn(shape, opts);
      auto run = [&](bool kernel) {
        auto qv = q.clone().requires_grad_(true), kv = k.clone().requires_grad_(true);
        torch::Tensor qo, ko;
        if (kernel) {
          std::tie(qo, ko) = rope_qk(qv, kv, cos, sin);
        } else {
          qo = rope_reference(qv, cos, sin);
          ko = rope_reference(kv, cos, sin);
        }
        torch::autograd::backward({qo, ko}, {gq, gk});
        return std::vector<torch::Tensor>{qo.detach(), ko.detach(), qv.grad(), kv.grad()};
      };
      const auto ours = run(true), ref = run(false);
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(ours[i].scalar_type(), dtype) << i;
        EXPECT_LT(relative_error(ours[i], ref[i]), tol) << i;
      }
    }
  }
}

// The fused-QKV entry points against rope_reference: rope_qkv_ rotates q and k of a packed
// [b, s, 3 h d] buffer in place and leaves v alone; rope_qkv_backward is the autograd
// gradient of that map (rotate q, k; pass v) for gradients given as strided views.
void check_qkv(torch::Device device, torch::ScalarType dtype, std::int64_t B, std::int64_t T, std::int64_t H,
               std::int64_t D, double tol) {
  auto [cos, sin] = tables(T + 3, D, device);
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  const auto qkv = torch::randn({B, T, 3 * H * D}, opts);
  auto rotated = qkv.clone();
  kernels::rope::rope_qkv_(rotated, H, cos, sin);
  const auto split = qkv.view({B, T, 3, H, D}), out = rotated.view({B, T, 3, H, D});
  EXPECT_LT(relative_error(out.select(2, 0), rope_reference(split.select(2, 0), cos, sin)), tol);
  EXPECT_LT(relative_error(out.select(2, 1), rope_reference(split.select(2, 1), cos, sin)), tol);
  EXPECT_TRUE(torch::equal(out.select(2, 2), split.select(2, 2)));
  // Gradients as [b, h, s, d] tensors seen as [b, s, h, d] (what attention's backward returns).
  auto grad = [&] { return torch::randn({B, H, T, D}, opts).transpose(1, 2); };
  const auto gq = grad(), gk = grad(), gv = grad();
  auto x = split.to(torch::kFloat).detach().requires_grad_(true);
  const auto rq = rope_reference(x.select(2, 0), cos, sin), rk = rope_reference(x.select(2, 1), cos, sin);
  torch::autograd::backward({rq, rk, x.select(2, 2)}, {gq.to(torch::kFloat), gk.to(torch::kFloat), gv.to(torch::kFloat)});
  const auto dqkv = kernels::rope::rope_qkv_backward(gq, gk, gv, cos, sin);
  EXPECT_EQ(dqkv.scalar_type(), dtype);
  EXPECT_EQ(dqkv.sizes(), qkv.sizes());
  EXPECT_LT(relative_error(dqkv, x.grad().flatten(2)), tol);
  EXPECT_TRUE(torch::equal(dqkv.view({B, T, 3, H, D}).select(2, 2), gv));
}

TEST(RopeQkvReference, RotatesQAndKInPlaceAndItsBackwardIsTheGradient) {
  torch::manual_seed(3);
  check_qkv(torch::kCPU, torch::kFloat, 2, 5, 3, 8, 1e-6);
  auto [cos, sin] = tables(4, 6, torch::kCPU);
  auto odd_width = torch::randn({1, 4, 20});
  EXPECT_THROW(kernels::rope::rope_qkv_(odd_width, 2, cos, sin), std::invalid_argument);
}

TEST(RopeQkvKernel, MatchesTheReferenceOnPackedAndStridedViews) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  // 12 x 64: small; 20 x 128: 2.7B; 2 x 6: d_head not a multiple of the vector (pairs path).
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{4, 256, 12, 64}, {1, 9, 20, 128}, {2, 7, 2, 6}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::to_string(shape[2]) + " heads of " + std::to_string(shape[3]) + " " +
                   std::string(c10::toString(dtype)));
      check_qkv(torch::kCUDA, dtype, shape[0], shape[1], shape[2], shape[3], dtype == torch::kFloat ? 1e-6 : 1e-2);
    }
  }
}

}  // namespace
