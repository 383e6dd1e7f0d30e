#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "adamw_optimizer.hpp"
#include "optimizer_state.hpp"
#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/optimizer.hpp"
#include "config/validate.hpp"

namespace {

using plugins::adamw::AdamW;
using torch::optim::AdamWOptions;

constexpr std::uint64_t kSeed = 42;

std::vector<torch::Tensor> random_params(std::uint64_t seed, torch::Device device = torch::kCPU) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> params;
  for (auto shape : std::vector<std::vector<std::int64_t>>{{7, 5}, {13}, {3, 4, 2}, {1}})
    params.push_back(torch::randn(shape).to(device).requires_grad_(true));
  return params;
}

std::vector<torch::Tensor> clone_params(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / b.norm().item<double>();
}

// Runs `steps` steps of both optimizers on identical random gradients and
// returns the worst relative parameter error.
double worst_error_against_libtorch(const AdamWOptions& options, int steps, torch::Device device = torch::kCPU) {
  std::vector<torch::Tensor> ours = random_params(kSeed, device), theirs = clone_params(ours);
  AdamW adamw({torch::optim::OptimizerParamGroup(ours)}, options);
  torch::optim::AdamW reference({torch::optim::OptimizerParamGroup(theirs)}, options);
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(kSeed);
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < ours.size(); ++i) {
      torch::Tensor g = at::randn(ours[i].sizes(), gen).to(device);
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
    }
    adamw.step();
    reference.step();
  }
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, relative_error(ours[i], theirs[i]));
  return worst;
}

TEST(AdamW, MatchesLibTorchAdamWOverManySteps) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const AdamWOptions options = AdamWOptions(1e-2).weight_decay(0.01);
  EXPECT_LT(worst_error_against_libtorch(options, 20), 1e-6);
}

TEST(AdamW, MatchesLibTorchWithOtherBetasAndStrongWeightDecay) {
  const AdamWOptions options = AdamWOptions(3e-2).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.3);
  EXPECT_LT(worst_error_against_libtorch(options, 10), 1e-6);
}

TEST(AdamW, MatchesLibTorchAdamWOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_LT(worst_error_against_libtorch(AdamWOptions(1e-2).weight_decay(0.01), 20, torch::kCUDA), 1e-6);
}

TEST(AdamW, FirstStepMovesEachEntryByLrTimesSignOfGradient) {
  // With m = (1-b1) g and v = (1-b2) g^2, bias correction gives m_hat / sqrt(v_hat) = sign(g).
  torch::Tensor p = torch::zeros({4}).requires_grad_(true);
  p.mutable_grad() = torch::tensor({2.0f, -3.0f, 0.5f, -0.25f});
  AdamW adamw({torch::optim::OptimizerParamGroup({p})}, AdamWOptions(0.1).weight_decay(0.0));
  adamw.step();
  EXPECT_TRUE(torch::allclose(p, torch::tensor({-0.1f, 0.1f, -0.1f, 0.1f}), 1e-5, 1e-6));
}

TEST(AdamW, WeightDecayShrinksParametersWithZeroGradient) {
  torch::Tensor p = torch::ones({3}).requires_grad_(true);
  p.mutable_grad() = torch::zeros({3});
  AdamW adamw({torch::optim::OptimizerParamGroup({p})}, AdamWOptions(0.1).weight_decay(0.5));
  adamw.step();
  EXPECT_TRUE(torch::allclose(p, torch::full({3}, 1.0f - 0.1f * 0.5f)));
}

TEST(AdamW, SkipsParametersWithoutGradientAndCountsStateBytes) {
  std::vector<torch::Tensor> params = random_params(kSeed);
  AdamW adamw({torch::optim::OptimizerParamGroup(params)}, AdamWOptions());
  EXPECT_EQ(adamw.state_bytes(), 0);
  params[0].mutable_grad() = torch::ones_like(params[0]);
  const torch::Tensor untouched = params[1].detach().clone();
  adamw.step();
  EXPECT_TRUE(torch::equal(params[1], untouched));
  EXPECT_EQ(adamw.state_bytes(), 2 * 7 * 5 * 4);  // exp_avg + exp_avg_sq, fp32
  EXPECT_EQ(adamw.state().size(), 1u);
}

TEST(AdamW, StateBytesHelperAgreesForLibTorchAdamW) {
  std::vector<torch::Tensor> params = random_params(kSeed);
  torch::optim::AdamW reference(params, AdamWOptions());
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  reference.step();
  EXPECT_EQ(plugins::adamw::optimizer_state_bytes(reference), 2 * (35 + 13 + 24 + 1) * 4);
}

TEST(AdamW, GroupsKeepTheirOwnLearningRate) {
  torch::Tensor a = torch::zeros({2}).requires_grad_(true), b = torch::zeros({2}).requires_grad_(true);
  a.mutable_grad() = torch::ones({2});
  b.mutable_grad() = torch::ones({2});
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{a});
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<AdamWOptions>(AdamWOptions(0.5).weight_decay(0)));
  AdamW adamw(groups, AdamWOptions(0.1).weight_decay(0));
  adamw.step();
  EXPECT_NEAR(a[0].item<double>(), -0.1, 1e-6);
  EXPECT_NEAR(b[0].item<double>(), -0.5, 1e-6);
}

TEST(AdamW, RejectsAmsgradAndNegativeLearningRate) {
  std::vector<torch::Tensor> params = random_params(kSeed);
  EXPECT_THROW(AdamW({torch::optim::OptimizerParamGroup(params)}, AdamWOptions().amsgrad(true)), std::invalid_argument);
  EXPECT_THROW(AdamW({torch::optim::OptimizerParamGroup(params)}, AdamWOptions(-1.0)), std::invalid_argument);
}

TEST(AdamW, PluginDefaultsAreTheSpecsAndMakeBuildsThisAdamW) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Optimizer, "adamw");
  EXPECT_DOUBLE_EQ(params.number("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(params.number("beta1"), 0.9);
  EXPECT_DOUBLE_EQ(params.number("beta2"), 0.999);
  EXPECT_DOUBLE_EQ(params.number("eps"), 1e-8);
  EXPECT_DOUBLE_EQ(params.number("weight_decay"), 0.01);
  runner::Context ctx;
  ctx.plugins = &registry;
  auto factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, params);
  std::vector<torch::Tensor> ours = random_params(kSeed), theirs = clone_params(ours);
  auto optimizer = factory->make({torch::optim::OptimizerParamGroup(ours)});
  torch::optim::AdamW reference(theirs, AdamWOptions(1e-3).weight_decay(0.01));
  for (size_t i = 0; i < ours.size(); ++i) {
    ours[i].mutable_grad() = torch::full_like(ours[i], 0.3);
    theirs[i].mutable_grad() = torch::full_like(theirs[i], 0.3);
  }
  optimizer->step();
  reference.step();
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_LT(relative_error(ours[i], theirs[i]), 1e-6);
}

}  // namespace
