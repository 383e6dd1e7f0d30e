// optimizer/sharded on Gloo ranks in one process: after each step every rank holds
// the weights its inner optimizer computes over all parameters in one process, while
// each rank keeps the optimizer state of its own shard only.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <torch/torch.h>

#include "gloo_ranks.hpp"
#include "config/registry.hpp"
#include "runner/optimizer.hpp"
#include "config/validate.hpp"

namespace runner::testing {
namespace {

class ShardedOptimizer : public ::testing::Test {
 protected:
  void SetUp() override { registry.scan({RUNNER_TEST_PLUGIN_DIR}); }

  // Parameters of mixed sizes (the shards balance by bytes, largest first).
  static std::vector<torch::Tensor> parameters() {
    std::vector<torch::Tensor> out;
    int i = 0;
    for (const std::vector<std::int64_t>& shape : std::vector<std::vector<std::int64_t>>{{64}, {8, 8}, {3}, {16, 4}, {5}, {7, 2}}) {
      const std::int64_t n = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
      out.push_back((torch::sin(torch::arange(n, torch::kFloat) + (++i)) * 0.3).view(shape).requires_grad_(true));
    }
    return out;
  }

  // The same (already averaged) gradients on every rank, different in every step.
  static void set_gradients(const std::vector<torch::Tensor>& params, int step) {
    int i = 0;
    for (const auto& p : params)
      p.mutable_grad() = torch::cos(torch::arange(p.numel(), torch::kFloat) * (++i) + step).view_as(p) * 0.1;
  }

  std::unique_ptr<Optimizer> build(Context& ctx, const std::string& name, const std::string& yaml,
                                   const std::vector<torch::Tensor>& params) {
    auto factory = ctx.create<OptimizerFactory>(PluginKind::Optimizer,
                                                resolve_plugin_options(registry, PluginKind::Optimizer, name, yaml));
    return factory->build({torch::optim::OptimizerParamGroup(params)});
  }

  // Three steps of sharded(inner with `options`, a YAML flow mapping) on `world_size`
  // ranks against `inner` alone.
  void expect_steps_like(const std::string& inner, const std::string& options, int world_size) {
    std::vector<std::int64_t> state_bytes(static_cast<size_t>(world_size));
    std::int64_t reference_state_bytes = 0;
    on_gloo_ranks(world_size, [&](const Distributed& dist) {
      Context ctx;
      ctx.dist = dist;
      ctx.plugins = &registry;
      const auto params = parameters(), reference_params = parameters();
      auto sharded = build(ctx, "sharded", "{inner: {name: " + inner + ", " + options + "}}", params);
      Context alone;
      alone.plugins = &registry;
      auto reference = build(alone, inner, "{" + options + "}", reference_params);
      for (int step = 0; step < 3; ++step) {
        set_gradients(params, step);
        set_gradients(reference_params, step);
        sharded->step();
        reference->step();
      }
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(torch::allclose(params[i], reference_params[i], 1e-6, 1e-7))
            << inner << ", rank " << dist.rank << ", parameter " << i << ": max difference "
            << (params[i] - reference_params[i]).abs().max().item<double>();
      state_bytes[static_cast<size_t>(dist.rank)] = sharded->state_bytes();
      if (dist.rank == 0) reference_state_bytes = reference->state_bytes();
      sharded->zero_grad(true);
      for (const auto& p : params) EXPECT_FALSE(p.grad().defined()) << "zero_grad clears unowned parameters too";
    });
    std::int64_t total = 0;
    for (std::int64_t bytes : state_bytes) {
      EXPECT_LT(bytes, reference_state_bytes) << inner << ": a rank holds state beyond its shard";
      total += bytes;
    }
    EXPECT_EQ(total, reference_state_bytes) << inner << ": the shards' state adds up to the unsharded state";
  }

  PluginRegistry registry;
};

TEST_F(ShardedOptimizer, AdamWOnTwoRanksStepsLikeAdamWAloneWithItsStateSplit) {
  expect_steps_like("adamw", "lr: 0.01, weight_decay: 0.1", 2);
}

TEST_F(ShardedOptimizer, SgdWithMomentumOnThreeRanksStepsLikeSgdAlone) {
  expect_steps_like("sgd", "lr: 0.1, momentum: 0.9", 3);
}

}  // namespace
}  // namespace runner::testing
