#include <cmath>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "cross_entropy/cross_entropy.hpp"

namespace {

using kernels::cross_entropy::cross_entropy;
using kernels::cross_entropy::cross_entropy_reference;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() / b.to(torch::kDouble).norm().item<double>();
}

struct Result {
  torch::Tensor loss, grad;
};

template <class Op>
Result run(Op op, const torch::Tensor& logits, const torch::Tensor& targets) {
  auto x = logits.clone().requires_grad_(true);
  auto loss = op(x, targets);
  loss.backward();
  return {loss.detach(), x.grad()};
}

// The spec in fp64: mean of log-sum-exp minus the target logit; gradient softmax - onehot over rows.
TEST(CrossEntropyReference, MatchesTheSpecAndItsGradient) {
  torch::manual_seed(0);
  const auto logits = torch::randn({9, 31}) * 4, targets = torch::randint(31, {9});
  const Result r = run(cross_entropy_reference, logits, targets);
  const auto x = logits.to(torch::kDouble);
  const auto lse = x.logsumexp(1);
  const auto spec = (lse - x.gather(1, targets.unsqueeze(1)).squeeze(1)).mean();
  EXPECT_NEAR(r.loss.item<double>(), spec.item<double>(), 1e-5);
  const auto grad = ((x - lse.unsqueeze(1)).exp() - torch::one_hot(targets, 31).to(torch::kDouble)) / 9.0;
  EXPECT_LT(relative_error(r.grad, grad), 1e-5);
}

TEST(CrossEntropyReference, CpuTensorsTakeTheReferenceAndShapesAreChecked) {
  const auto logits = torch::randn({4, 7}), targets = torch::randint(7, {4});
  EXPECT_TRUE(torch::equal(cross_entropy(logits, targets), cross_entropy_reference(logits, targets)));
  EXPECT_THROW(cross_entropy(logits, torch::randint(7, {5})), std::invalid_argument);
}

TEST(CrossEntropyKernel, MatchesTheReferenceLossAndGradient) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(1);
  for (const auto& shape : std::vector<std::pair<std::int64_t, std::int64_t>>{{1024, 10000}, {7, 33}, {3, 50257}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::to_string(shape.second) + " " + std::string(c10::toString(dtype)));
      const auto logits = (torch::randn({shape.first, shape.second}, torch::kCUDA) * 3).to(dtype);
      const auto targets = torch::randint(shape.second, {shape.first}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
      const Result k = run(cross_entropy, logits, targets), ref = run(cross_entropy_reference, logits, targets);
      EXPECT_EQ(k.loss.scalar_type(), torch::kFloat);
      EXPECT_EQ(k.grad.scalar_type(), dtype);
      EXPECT_NEAR(k.loss.item<double>(), ref.loss.item<double>(), 1e-5 * ref.loss.item<double>());
      EXPECT_LT(relative_error(k.grad, ref.grad), dtype == torch::kFloat ? 1e-5 : 1e-2);
    }
  }
}

TEST(CrossEntropyKernel, OutOfRangeTargetGivesNaN) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto logits = torch::randn({2, 5}, torch::kCUDA);
  const auto targets = torch::tensor({1, 9}, torch::TensorOptions().dtype(torch::kLong)).to(torch::kCUDA);
  EXPECT_TRUE(std::isnan(cross_entropy(logits, targets).item<double>()));
}

}  // namespace
