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

}  // namespace
