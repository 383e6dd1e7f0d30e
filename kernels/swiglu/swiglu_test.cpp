#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "swiglu/swiglu.hpp"

namespace {

using kernels::swiglu::silu_mul;
using kernels::swiglu::silu_mul_reference;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() / b.to(torch::kDouble).norm().item<double>();
}

struct Result {
  torch::Tensor out, da, db;
};

template <class Op>
Result run(Op op, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& g) {
  auto av = a.clone().requires_grad_(true), bv = b.clone().requires_grad_(true);
  auto out = op(av, bv);
  out.backward(g);
  return {out.detach(), av.grad(), bv.grad()};
}

TEST(SwiGLUReference, MatchesTheSpecAndItsGradient) {
  torch::manual_seed(0);
  const auto a = torch::randn({6, 40}, torch::kDouble), b = torch::randn({6, 40}, torch::kDouble);
  const auto g = torch::randn({6, 40}, torch::kDouble);
  const Result r = run(silu_mul_reference, a, b, g);
  const auto s = 1.0 / (1.0 + (-a).exp());
  EXPECT_LT(relative_error(r.out, a * s * b), 1e-12);
  EXPECT_LT(relative_error(r.da, g * b * s * (1 + a * (1 - s))), 1e-12);
  EXPECT_LT(relative_error(r.db, g * a * s), 1e-12);
}

TEST(SwiGLUReference, CpuTensorsTakeTheReference) {
  const auto a = torch::randn({3, 4}), b = torch::randn({3, 4});
  EXPECT_TRUE(torch::equal(silu_mul(a, b), silu_mul_reference(a, b)));
  EXPECT_THROW(silu_mul(a, torch::randn({4, 3})), std::invalid_argument);
}

TEST(SwiGLUKernel, MatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(1);
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{4, 256, 3072}, {3, 7, 33}, {1}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::to_string(shape.back()) + " " + std::string(c10::toString(dtype)));
      const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
      const auto a = torch::randn(shape, opts) * 3, b = torch::randn(shape, opts), g = torch::randn(shape, opts);
      const Result k = run(silu_mul, a, b, g), ref = run(silu_mul_reference, a, b, g);
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
      EXPECT_EQ(k.out.scalar_type(), dtype);
      EXPECT_LT(relative_error(k.out, ref.out), tol);
      EXPECT_LT(relative_error(k.da, ref.da), tol);
      EXPECT_LT(relative_error(k.db, ref.db), tol);
    }
  }
}

// The packed entry points against silu_mul_reference and its autograd gradient: ab holds a | b
// per row (one fused w1 | w3 projection's output).
void check_packed(torch::Device device, torch::ScalarType dtype, std::vector<std::int64_t> shape, double tol) {
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  const std::int64_t cols = shape.back();
  shape.back() = 2 * cols;
  const auto ab = torch::randn(shape, opts) * 2;
  const auto a = ab.narrow(-1, 0, cols), b = ab.narrow(-1, cols, cols);
  shape.back() = cols;
  const auto g = torch::randn(shape, opts);
  const auto out = kernels::swiglu::silu_mul_packed(ab);
  EXPECT_EQ(out.scalar_type(), dtype);
  auto af = a.to(torch::kFloat).detach().requires_grad_(true), bf = b.to(torch::kFloat).detach().requires_grad_(true);
  const auto ref = silu_mul_reference(af, bf);
  ref.backward(g.to(torch::kFloat));
  EXPECT_LT(relative_error(out, ref.detach()), tol);
  const auto dab = kernels::swiglu::silu_mul_packed_backward(g, ab);
  EXPECT_EQ(dab.scalar_type(), dtype);
  EXPECT_EQ(dab.sizes(), ab.sizes());
  EXPECT_LT(relative_error(dab.narrow(-1, 0, cols), af.grad()), tol);
  EXPECT_LT(relative_error(dab.narrow(-1, cols, cols), bf.grad()), tol);
}

TEST(SwiGLUPackedReference, MatchesTheReferenceOnTheTwoHalves) {
  torch::manual_seed(5);
  check_packed(torch::kCPU, torch::kFloat, {3, 5, 24}, 1e-6);
  EXPECT_THROW(kernels::swiglu::silu_mul_packed(torch::randn({3, 5})), std::invalid_argument);
}

TEST(SwiGLUPackedKernel, MatchesTheReferenceOnTheTwoHalves) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(6);
  // 3072: small's d_ff (16-byte packs); 33: single elements.
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{4, 256, 3072}, {3, 7, 33}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::to_string(shape.back()) + " " + std::string(c10::toString(dtype)));
      check_packed(torch::kCUDA, dtype, shape, dtype == torch::kFloat ? 1e-6 : 1e-2);
    }
  }
}

}  // namespace
