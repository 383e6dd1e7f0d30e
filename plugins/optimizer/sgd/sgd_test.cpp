#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/optimizer.hpp"
#include "config/validate.hpp"

namespace {

std::unique_ptr<runner::OptimizerFactory> make_factory(runner::PluginRegistry& registry, const std::string& yaml) {
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Optimizer, "sgd", yaml);
  runner::Context ctx;
  ctx.plugins = &registry;
  return ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, params);
}

TEST(Sgd, DefaultStepIsMinusLrTimesGradient) {
  runner::PluginRegistry registry;
  auto factory = make_factory(registry, "");
  torch::Tensor p = torch::ones({3}).requires_grad_(true);
  p.mutable_grad() = torch::tensor({1.0f, -2.0f, 4.0f});
  auto optimizer = factory->make({torch::optim::OptimizerParamGroup({p})});
  optimizer->step();
  EXPECT_TRUE(torch::allclose(p, torch::tensor({1.0f - 1e-3f, 1.0f + 2e-3f, 1.0f - 4e-3f})));
}

TEST(Sgd, MomentumAccumulatesAcrossSteps) {
  runner::PluginRegistry registry;
  auto factory = make_factory(registry, "{lr: 0.1, momentum: 0.9}");
  torch::Tensor p = torch::zeros({1}).requires_grad_(true);
  auto optimizer = factory->make({torch::optim::OptimizerParamGroup({p})});
  for (int i = 0; i < 2; ++i) {
    p.mutable_grad() = torch::ones({1});
    optimizer->step();
  }
  // buffer: 1, then 0.9 * 1 + 1 = 1.9; p = -0.1 * (1 + 1.9)
  EXPECT_NEAR(p.item<double>(), -0.29, 1e-6);
}

}  // namespace
