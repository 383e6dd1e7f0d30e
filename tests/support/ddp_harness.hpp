// For the tests of DDP strategies (plugins/ddp/*): ranks (threads with their own
// Gloo group, gloo_ranks.hpp) start from different weights and train one step on
// different batches of a small model. Whatever the strategy, attach() must leave
// every rank with rank 0's weights and finish_gradient_synchronization() with the
// mean of the ranks' gradients: what one process computes over the whole batch.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "gloo_ranks.hpp"
#include "config/registry.hpp"
#include "runner/ddp.hpp"
#include "config/validate.hpp"

namespace runner::testing {

// What one rank saw in its step, and what it should have seen.
struct DdpStep {
  std::vector<torch::Tensor> weights, rank0_weights;  // after attach()
  std::vector<torch::Tensor> grads;                   // after finish_gradient_synchronization()
  std::vector<torch::Tensor> mean_grads, own_grads;   // over every rank's batch / this rank's alone
  CommunicationStats communication;
  Record report;
};

class DdpStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override { registry.scan({RUNNER_TEST_PLUGIN_DIR}); }

  // One step of plugins/ddp/<strategy> with `options_yaml` on `world_size` ranks,
  // under NoSync when `no_sync`; the steps in rank order.
  std::vector<DdpStep> step(const std::string& strategy, int world_size, bool no_sync = false,
                            const std::string& options_yaml = "") {
    const Params params = resolve_plugin_options(registry, PluginKind::Ddp, strategy, options_yaml);
    std::vector<DdpStep> steps(static_cast<size_t>(world_size));
    on_gloo_ranks(world_size, [&](const Distributed& dist) {
      DdpStep& out = steps[static_cast<size_t>(dist.rank)];
      Context ctx;
      ctx.dist = dist;
      ctx.plugins = &registry;
      auto ddp = ctx.create<DataParallel>(PluginKind::Ddp, params);
      auto model = small_model(dist.rank);
      ddp->attach(*model, ctx);
      for (const auto& p : model->parameters()) out.weights.push_back(p.detach().clone());
      ddp->zero_grad(*model);
      ddp->prepare_for_backward();
      {
        std::unique_ptr<NoSync> local;
        if (no_sync) local = std::make_unique<NoSync>(*ddp);
        loss(model, dist.rank).backward();
        ddp->finish_gradient_synchronization();
      }
      for (const auto& p : model->parameters()) out.grads.push_back(p.grad().clone());
      out.communication = ddp->take_communication();
      ddp->report(out.report);

      // The same step in this thread alone, from rank 0's weights.
      auto reference = small_model(0);
      for (const auto& p : reference->parameters()) out.rank0_weights.push_back(p.detach().clone());
      for (int r = 0; r < world_size; ++r) {
        reference->zero_grad();
        loss(reference, r).backward();
        const auto params = reference->parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          const torch::Tensor g = params[i].grad() / world_size;
          if (r == 0) out.mean_grads.push_back(g.clone());
          else out.mean_grads[i] += g;
          if (r == dist.rank) out.own_grads.push_back(params[i].grad().clone());
        }
      }
    });
    return steps;
  }

  // Two linear layers (4 parameters, 39 floats); rank r's weights differ from rank 0's.
  static torch::nn::Sequential small_model(int rank) {
    torch::nn::Sequential model(torch::nn::Linear(5, 4), torch::nn::Functional(torch::tanh), torch::nn::Linear(4, 3));
    torch::NoGradGuard no_grad;
    int i = 0;
    for (auto& p : model->parameters())
      p.copy_((torch::sin(torch::arange(p.numel(), torch::kFloat) * (++i) + rank) * 0.5).view_as(p));
    return model;
  }

  // Each rank's own batch.
  static torch::Tensor loss(torch::nn::Sequential& model, int rank) {
    const torch::Tensor x = torch::cos(torch::arange(10, torch::kFloat) + 3.0 * rank).view({2, 5});
    return model->forward(x).pow(2).sum();
  }

  static void expect_close(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected,
                           const std::string& what) {
    ASSERT_EQ(actual.size(), expected.size()) << what;
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_TRUE(torch::allclose(actual[i], expected[i], 1e-5, 1e-6))
          << what << ", parameter " << i << ": max difference "
          << (actual[i] - expected[i]).abs().max().item<double>();
  }

  // Every rank holds rank 0's weights and the mean gradient, and rank r's own
  // gradient differs from the mean (or the check would prove nothing).
  static void expect_synchronized(const std::vector<DdpStep>& steps) {
    for (size_t r = 0; r < steps.size(); ++r) {
      expect_close(steps[r].weights, steps[r].rank0_weights, "rank " + std::to_string(r) + " weights after attach");
      expect_close(steps[r].grads, steps[r].mean_grads, "rank " + std::to_string(r) + " gradients");
      EXPECT_FALSE(torch::allclose(steps[r].own_grads.back(), steps[r].mean_grads.back()));
    }
  }

  // Under NoSync each rank keeps the gradient of its own batch.
  static void expect_local(const std::vector<DdpStep>& steps) {
    for (size_t r = 0; r < steps.size(); ++r)
      expect_close(steps[r].grads, steps[r].own_grads, "rank " + std::to_string(r) + " gradients under NoSync");
  }

  static double reported(const DdpStep& step, const std::string& metric) {
    const Metric* m = step.report.find(metric);
    return m ? std::get<double>(m->value) : std::nan("");
  }

  // The strategy's contract on 2 ranks and on 3 (an odd world size: the mean is no halving).
  void expect_mean_gradients(const std::string& strategy) {
    expect_synchronized(step(strategy, 2));
    expect_synchronized(step(strategy, 3));
  }

  // `per_step` collectives carry every gradient byte once, as report() says.
  void expect_collectives(const std::string& strategy, int per_step) {
    for (const DdpStep& s : step(strategy, 2)) {
      EXPECT_EQ(s.communication.collectives, per_step);
      EXPECT_EQ(s.communication.bytes, kGradientBytes);
      EXPECT_GE(s.communication.collective_ms, 0.0);
      EXPECT_EQ(reported(s, "collectives_per_step"), per_step);
    }
  }

  // Under NoSync (gradient accumulation) nothing is communicated.
  void expect_no_sync_keeps_local_gradients(const std::string& strategy) {
    const auto steps = step(strategy, 2, /*no_sync=*/true);
    expect_local(steps);
    for (const DdpStep& s : steps) EXPECT_EQ(s.communication.collectives, 0);
  }

  static constexpr int kParameters = 4;
  static constexpr std::int64_t kGradientBytes = (5 * 4 + 4 + 4 * 3 + 3) * 4;
  PluginRegistry registry;
};

}  // namespace runner::testing

// The tests every strategy passes, for plugins/ddp/<name>/<name>_test.cpp:
// RUNNER_DDP_STRATEGY_TESTS(NaiveDdp, "naive", kParameters).
#define RUNNER_DDP_STRATEGY_TESTS(Suite, strategy, collectives_per_step)                         \
  using Suite = ::runner::testing::DdpStrategyTest;                                              \
  TEST_F(Suite, EveryRankGetsRankZerosWeightsAndTheMeanGradient) { expect_mean_gradients(strategy); } \
  TEST_F(Suite, CollectivesCarryEveryGradientByteOnce) { expect_collectives(strategy, collectives_per_step); } \
  TEST_F(Suite, NoSyncCommunicatesNothing) { expect_no_sync_keeps_local_gradients(strategy); }
