#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/registry.hpp"
#include "runner/context.hpp"
#include "toy_model.hpp"
#include "config/validate.hpp"

namespace {

using plugins::toy::ToyForwardTrace;
using plugins::toy::ToyModel;

runner::Batch batch_of(ToyModel& model, std::int64_t size, std::uint64_t seed) {
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return model.random_batch(size, gen);
}

TEST(ToyModel, ParametersAreFc1LayerNormFc2WithoutBiases) {
  ToyModel model(12, 5, torch::kCPU, 0);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& p : model.module().named_parameters()) shapes[p.key()] = p.value().sizes().vec();
  const std::map<std::string, std::vector<std::int64_t>> expected{
      {"fc1.weight", {10, 12}}, {"ln.weight", {10}}, {"ln.bias", {10}}, {"fc2.weight", {5, 10}}};
  EXPECT_EQ(shapes, expected);
}

TEST(ToyModel, TraceFollowsTheLayersAndEndsInTheLogits) {
  ToyModel model(12, 5, torch::kCPU, 1);
  runner::Batch batch = batch_of(model, 4, 2);
  ToyForwardTrace t = model.trace(batch.inputs);
  EXPECT_TRUE(torch::allclose(t.relu_output, t.fc1_output.clamp_min(0)));
  EXPECT_TRUE(torch::allclose(t.layer_norm_output.mean(-1), torch::zeros({4}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::equal(t.logits, model.forward(batch.inputs)));
  EXPECT_EQ(t.logits.sizes(), (std::vector<std::int64_t>{4, 5}));
}

TEST(ToyModel, RandomBatchHasFloatInputsAndClassTargets) {
  ToyModel model(12, 5, torch::kCPU, 1);
  runner::Batch batch = batch_of(model, 64, 3);
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kFloat);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{64, 12}));
  EXPECT_EQ(batch.targets.scalar_type(), torch::kLong);
  EXPECT_GE(batch.targets.min().item<std::int64_t>(), 0);
  EXPECT_LT(batch.targets.max().item<std::int64_t>(), 5);
}

TEST(ToyModel, LossIsAScalarWithGradientsForEveryParameter) {
  ToyModel model(12, 5, torch::kCPU, 1);
  runner::Batch batch = batch_of(model, 8, 4);
  torch::Tensor loss = model.loss(model.forward(batch.inputs), batch.targets);
  EXPECT_EQ(loss.dim(), 0);
  loss.backward();
  for (const auto& p : model.module().named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
}

TEST(ToyModel, UnderCpuBf16AutocastDtypesMatchPyTorch) {
  // torch 2.11, torch.autocast("cpu", bfloat16): linear, relu and layer_norm give bf16,
  // cross_entropy fp32 (on CUDA, layer_norm is on autocast's fp32 list instead).
  ToyModel model(12, 5, torch::kCPU, 1);
  runner::Batch batch = batch_of(model, 8, 5);
  runner::AutocastScope autocast(torch::kCPU, runner::Precision::parse("bf16"));
  ToyForwardTrace t = model.trace(batch.inputs);
  EXPECT_EQ(t.fc1_output.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(t.relu_output.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(t.layer_norm_output.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(t.logits.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(model.loss(t.logits, batch.targets).scalar_type(), torch::kFloat);
  for (const auto& p : model.module().parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
}

TEST(ToyModel, TraceIsReachableFromAPluginCreatedModel) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Model, "toy", "{in_features: 7}");
  EXPECT_EQ(params.integer("out_features"), 10);
  runner::Context ctx;
  ctx.plugins = &registry;
  std::unique_ptr<runner::Model> model = ctx.create<runner::Model>(runner::PluginKind::Model, params);
  // Through the public runner::Model interface only: no toy type crosses the library boundary.
  const std::vector<runner::NamedTensor> trace = model->forward_traced(torch::randn({3, 7}));
  ASSERT_EQ(trace.size(), 4u);
  EXPECT_EQ(trace[2].name, "layer_norm_output");
  EXPECT_EQ(trace[2].tensor.sizes(), (std::vector<std::int64_t>{3, 10}));
  EXPECT_EQ(trace.back().name, "logits");
}

}  // namespace
