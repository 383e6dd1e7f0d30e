#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "fused_optimizer.hpp"
#include "optimizer_state.hpp"
#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/optimizer.hpp"
#include "runner/weight_copies.hpp"
#include "config/validate.hpp"

namespace {

using plugins::adamw::FusedAdamW;
using torch::optim::AdamWOptions;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / b.norm().item<double>();
}

// Ten steps of FusedAdamW and torch::optim::AdamW on identical random gradients.
double worst_error_over_ten_steps(torch::Device device) {
  torch::manual_seed(42);
  std::vector<torch::Tensor> ours, theirs;
  for (auto shape : std::vector<std::vector<std::int64_t>>{{7, 5}, {13}, {3, 4, 2}, {1}, {257, 129}}) {
    ours.push_back(torch::randn(shape).to(device).requires_grad_(true));
    theirs.push_back(ours.back().detach().clone().requires_grad_(true));
  }
  const AdamWOptions options = AdamWOptions(1e-2).weight_decay(0.01);
  FusedAdamW fused({torch::optim::OptimizerParamGroup(ours)}, options);
  torch::optim::AdamW reference({torch::optim::OptimizerParamGroup(theirs)}, options);
  for (int step = 0; step < 10; ++step) {
    for (size_t i = 0; i < ours.size(); ++i) {
      torch::Tensor g = torch::randn(ours[i].sizes()).to(device);
      ours[i].mutable_grad() = g.clone();
      theirs[i].mutable_grad() = g.clone();
    }
    fused.step();
    reference.step();
  }
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, relative_error(ours[i], theirs[i]));
  return worst;
}

TEST(FusedAdamW, MatchesLibTorchAdamWOverTenStepsOnCpu) { EXPECT_LT(worst_error_over_ten_steps(torch::kCPU), 1e-6); }

TEST(FusedAdamW, MatchesLibTorchAdamWOverTenStepsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_LT(worst_error_over_ten_steps(torch::kCUDA), 1e-6);
}

// Registered working copies are rewritten in the optimizer's pass and equal p.to(dtype) bit
// for bit after every step; the parameters update as without copies.
void expect_copies_track_parameters(torch::Device device) {
  torch::manual_seed(43);
  std::vector<torch::Tensor> params, plain, copies;
  // 200003: several 64 Ki chunks and a tail that is not a multiple of four.
  for (auto shape : std::vector<std::vector<std::int64_t>>{{7, 5}, {200003}, {64, 33}, {5}}) {
    params.push_back(torch::randn(shape).to(device).requires_grad_(true));
    plain.push_back(params.back().detach().clone().requires_grad_(true));
  }
  const std::vector<torch::ScalarType> dtypes{torch::kBFloat16, torch::kBFloat16, torch::kHalf};
  for (size_t i = 0; i < dtypes.size(); ++i) {  // the last parameter keeps no copy
    copies.push_back(params[i].detach().to(dtypes[i]));
    runner::register_weight_copy(params[i], copies.back());
  }
  EXPECT_FALSE(runner::weight_copy(params[3]).defined());
  EXPECT_TRUE(runner::weight_copy(params[0]).is_same(copies[0]));
  const AdamWOptions options = AdamWOptions(1e-2).weight_decay(0.01);
  FusedAdamW with_copies({torch::optim::OptimizerParamGroup(params)}, options);
  FusedAdamW without({torch::optim::OptimizerParamGroup(plain)}, options);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor g = torch::randn(params[i].sizes()).to(device);
      params[i].mutable_grad() = g.clone();
      plain[i].mutable_grad() = g.clone();
    }
    with_copies.step();
    without.step();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT(relative_error(params[i], plain[i]), 1e-6) << "parameter " << i << ", step " << step;
      if (i < copies.size())
        EXPECT_TRUE(torch::equal(copies[i], params[i].detach().to(dtypes[i]))) << "copy " << i << ", step " << step;
    }
  }
}

TEST(FusedAdamW, RewritesRegisteredWorkingCopiesBitForBitOnCpu) { expect_copies_track_parameters(torch::kCPU); }

TEST(FusedAdamW, RewritesRegisteredWorkingCopiesBitForBitOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_copies_track_parameters(torch::kCUDA);
}

TEST(WeightCopies, EntriesDieWithTheirCopy) {
  torch::Tensor weight = torch::ones({4});
  {
    torch::Tensor copy = weight.to(torch::kBFloat16);
    runner::register_weight_copy(weight, copy);
    EXPECT_TRUE(runner::weight_copy(weight).defined());
  }
  EXPECT_FALSE(runner::weight_copy(weight).defined());
  EXPECT_THROW(runner::register_weight_copy(weight, torch::ones({5}, torch::kBFloat16)), std::invalid_argument);
  EXPECT_THROW(runner::register_weight_copy(weight, torch::ones({4})), std::invalid_argument);
}

TEST(FusedAdamW, SkipsParametersWithoutGradientAndCountsStateBytes) {
  std::vector<torch::Tensor> params = {torch::ones({7, 5}).requires_grad_(true), torch::ones({3}).requires_grad_(true)};
  FusedAdamW adamw({torch::optim::OptimizerParamGroup(params)}, AdamWOptions());
  params[0].mutable_grad() = torch::ones_like(params[0]);
  adamw.step();
  EXPECT_TRUE(torch::equal(params[1], torch::ones({3})));
  EXPECT_EQ(plugins::adamw::optimizer_state_bytes(adamw), 2 * 7 * 5 * 4);
}

TEST(FusedAdamW, RejectsNonFloat32Parameters) {
  std::vector<torch::Tensor> params = {torch::ones({3}, torch::kDouble).requires_grad_(true)};
  EXPECT_THROW(FusedAdamW({torch::optim::OptimizerParamGroup(params)}, AdamWOptions()), std::invalid_argument);
}

TEST(FusedAdamW, ImplFusedOptionBuildsTheCapturableOptimizer) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params foreach_params = runner::resolve_plugin_options(registry, runner::PluginKind::Optimizer, "adamw");
  EXPECT_EQ(foreach_params.text("impl"), "foreach");
  runner::Context ctx;
  ctx.plugins = &registry;
  EXPECT_FALSE(ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, foreach_params)
                   ->supports_graph_capture());

  runner::Params fused_params =
      runner::resolve_plugin_options(registry, runner::PluginKind::Optimizer, "adamw", "{impl: fused}");
  auto factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, fused_params);
  EXPECT_TRUE(factory->supports_graph_capture());
  std::vector<torch::Tensor> params = {torch::zeros({4}).requires_grad_(true)};
  auto optimizer = factory->make({torch::optim::OptimizerParamGroup(params)});
  EXPECT_NE(dynamic_cast<FusedAdamW*>(optimizer.get()), nullptr);
}

}  // namespace
