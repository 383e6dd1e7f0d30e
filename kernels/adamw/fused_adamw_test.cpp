#include <algorithm>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "adamw/fused_adamw.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using kernels::adamw::Hyperparameters;

constexpr Hyperparameters kHyper{1e-2, 0.9, 0.999, 1e-8, 0.01};

// Shapes with a 1-element tensor, odd sizes (scalar tail), and one of several
// 64 Ki chunks; 40 of them, so a launch holds 32 and the next the rest.
std::vector<std::vector<std::int64_t>> shapes() {
  std::vector<std::vector<std::int64_t>> s = {{1}, {7, 5}, {13}, {3, 4, 2}, {300, 701}, {1024, 64}};
  for (int i = 0; s.size() < 40; ++i) s.push_back({17 + 31 * i});
  return s;
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const double norm = b.norm().item<double>();
  return (a - b).norm().item<double>() / (norm > 0 ? norm : 1.0);
}

struct State {
  std::vector<torch::Tensor> params, exp_avgs, exp_avg_sqs, steps;
  explicit State(const std::vector<torch::Tensor>& initial) {
    for (const auto& p : initial) {
      params.push_back(p.clone());
      exp_avgs.push_back(torch::zeros_like(p));
      exp_avg_sqs.push_back(torch::zeros_like(p));
      steps.push_back(torch::zeros({}, p.options()));
    }
  }
  void step(const std::vector<torch::Tensor>& grads, bool fused) {
    for (auto& s : steps) s.add_(1);
    if (fused)
      kernels::adamw::fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, steps, kHyper);
    else
      kernels::adamw::adamw_reference_(params, grads, exp_avgs, exp_avg_sqs, steps, kHyper);
  }
};

// Runs `steps` steps of ours (fused or reference) and torch::optim::AdamW on the same
// random gradients; returns the worst relative error over parameters and moments.
double worst_error_against_libtorch(torch::Device device, bool fused, int steps) {
  torch::manual_seed(7);
  std::vector<torch::Tensor> initial;
  for (const auto& shape : shapes()) initial.push_back(torch::randn(shape).to(device));
  State ours(initial);
  std::vector<torch::Tensor> theirs;
  for (const auto& p : initial) theirs.push_back(p.clone().requires_grad_(true));
  torch::optim::AdamW reference(theirs, torch::optim::AdamWOptions(kHyper.lr)
                                            .betas({kHyper.beta1, kHyper.beta2})
                                            .eps(kHyper.eps)
                                            .weight_decay(kHyper.weight_decay));
  for (int s = 0; s < steps; ++s) {
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < initial.size(); ++i) {
      grads.push_back(torch::randn(initial[i].sizes()).to(device));
      theirs[i].mutable_grad() = grads.back().clone();
    }
    ours.step(grads, fused);
    reference.step();
  }
  double worst = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    auto& st = static_cast<torch::optim::AdamWParamState&>(*reference.state().at(theirs[i].unsafeGetTensorImpl()));
    worst = std::max({worst, relative_error(ours.params[i], theirs[i].detach()),
                      relative_error(ours.exp_avgs[i], st.exp_avg()),
                      relative_error(ours.exp_avg_sqs[i], st.exp_avg_sq())});
  }
  return worst;
}

TEST(FusedAdamWReference, MatchesLibTorchAdamWOverTenSteps) {
  EXPECT_LT(worst_error_against_libtorch(torch::kCPU, /*fused=*/false, 10), 1e-6);
}

TEST(FusedAdamWReference, CpuTensorsTakeTheReferencePath) {
  EXPECT_LT(worst_error_against_libtorch(torch::kCPU, /*fused=*/true, 3), 1e-6);
}

TEST(FusedAdamWReference, RejectsMismatchedLists) {
  State s({torch::zeros({3})});
  std::vector<torch::Tensor> grads = {torch::zeros({4})};
  EXPECT_THROW(kernels::adamw::fused_adamw_(s.params, grads, s.exp_avgs, s.exp_avg_sqs, s.steps, kHyper),
               std::invalid_argument);
  std::vector<torch::Tensor> none;
  EXPECT_THROW(kernels::adamw::fused_adamw_(s.params, none, s.exp_avgs, s.exp_avg_sqs, s.steps, kHyper),
               std::invalid_argument);
}

TEST(FusedAdamWKernel, MatchesLibTorchAdamWOverTenStepsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_LT(worst_error_against_libtorch(torch::kCUDA, /*fused=*/true, 10), 1e-6);
}

TEST(FusedAdamWKernel, Bf16AndFp16GradientsMatchTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    torch::manual_seed(3);
    std::vector<torch::Tensor> initial;
    for (const auto& shape : shapes()) initial.push_back(torch::randn(shape, torch::kCUDA));
    State fused(initial), reference(initial);
    for (int s = 0; s < 5; ++s) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : initial) grads.push_back(torch::randn(p.sizes(), torch::kCUDA).to(dtype));
      fused.step(grads, true);
      reference.step(grads, false);
    }
    for (size_t i = 0; i < initial.size(); ++i)
      EXPECT_LT(relative_error(fused.params[i], reference.params[i]), 1e-6) << "tensor " << i << " " << dtype;
  }
}

TEST(FusedAdamWKernel, MisalignedViewsTakeTheScalarPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  // Contiguous views starting one float into their storage: not 16-byte aligned.
  auto offset_view = [](const torch::Tensor& t) { return torch::cat({torch::zeros({1}, t.options()), t}).narrow(0, 1, t.numel()); };
  torch::Tensor p0 = torch::randn({1000}, torch::kCUDA);
  State fused({offset_view(p0)}), reference({p0});
  fused.params[0] = offset_view(p0);
  fused.exp_avgs[0] = offset_view(torch::zeros({1000}, torch::kCUDA));
  fused.exp_avg_sqs[0] = offset_view(torch::zeros({1000}, torch::kCUDA));
  for (int s = 0; s < 3; ++s) {
    torch::Tensor g = torch::randn({1000}, torch::kCUDA);
    fused.step({offset_view(g)}, true);
    reference.step({g}, false);
  }
  EXPECT_LT(relative_error(fused.params[0], reference.params[0]), 1e-6);
}

#ifdef RUNNER_WITH_CUDA
TEST(FusedAdamWKernel, ReplaysInACudaGraphWithTheStepCountOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  std::vector<torch::Tensor> initial = {torch::randn({4096}, torch::kCUDA), torch::randn({77}, torch::kCUDA)};
  std::vector<torch::Tensor> grads = {torch::randn({4096}, torch::kCUDA), torch::randn({77}, torch::kCUDA)};
  State fused(initial), reference(initial);
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard side(c10::cuda::getStreamFromPool());
    graph.capture_begin();
    fused.step(grads, true);  // the step increment and the kernel are both captured
    graph.capture_end();
  }
  for (int s = 0; s < 3; ++s) {
    graph.replay();
    reference.step(grads, false);
  }
  torch::cuda::synchronize();
  EXPECT_FLOAT_EQ(fused.steps[0].item<float>(), 3.0f);
  for (size_t i = 0; i < initial.size(); ++i)
    EXPECT_LT(relative_error(fused.params[i], reference.params[i]), 1e-6) << "tensor " << i;
}
#endif

}  // namespace
