#include "toy_model.hpp"

#include <cmath>

#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include "runner/device.hpp"

namespace plugins::toy {
namespace {

// PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
torch::Tensor linear_weight(std::int64_t d_in, std::int64_t d_out, const c10::Device& device, at::Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d_in));
  return at::empty({d_out, d_in}, at::TensorOptions().dtype(at::kFloat).device(device)).uniform_(-bound, bound, gen);
}

}  // namespace

ToyNet::ToyNet(std::int64_t in_features, std::int64_t out_features, const c10::Device& device, at::Generator& gen) {
  const auto fp32 = at::TensorOptions().dtype(at::kFloat).device(device);
  auto fc1 = std::make_shared<torch::nn::Module>();
  fc1_weight = fc1->register_parameter("weight", linear_weight(in_features, ToyModel::kHiddenFeatures, device, gen));
  auto ln = std::make_shared<torch::nn::Module>();
  ln_weight = ln->register_parameter("weight", at::ones({ToyModel::kHiddenFeatures}, fp32));
  ln_bias = ln->register_parameter("bias", at::zeros({ToyModel::kHiddenFeatures}, fp32));
  auto fc2 = std::make_shared<torch::nn::Module>();
  fc2_weight = fc2->register_parameter("weight", linear_weight(ToyModel::kHiddenFeatures, out_features, device, gen));
  register_module("fc1", fc1);
  register_module("ln", ln);
  register_module("fc2", fc2);
}

ToyForwardTrace ToyNet::forward_traced(const torch::Tensor& x) const {
  ToyForwardTrace t;
  t.fc1_output = at::linear(x, fc1_weight);
  t.relu_output = at::relu(t.fc1_output);
  t.layer_norm_output = at::layer_norm(t.relu_output, {ToyModel::kHiddenFeatures}, ln_weight, ln_bias, 1e-5);
  t.logits = at::linear(t.layer_norm_output, fc2_weight);
  return t;
}

ToyModel::ToyModel(std::int64_t in_features, std::int64_t out_features, const c10::Device& device,
                   std::uint64_t seed)
    : in_features_(in_features), out_features_(out_features), device_(device) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "toy model: in_features and out_features must be > 0, got ",
              in_features, " and ", out_features);
  at::Generator gen = runner::seeded_generator(device, seed);
  net_ = std::make_shared<ToyNet>(in_features, out_features, device, gen);
}

runner::Batch ToyModel::random_batch(std::int64_t batch_size, torch::Generator& generator) {
  const auto on_gen = at::TensorOptions().device(generator.device());
  torch::Tensor inputs = at::randn({batch_size, in_features_}, generator, on_gen.dtype(at::kFloat));
  torch::Tensor targets = at::randint(out_features_, {batch_size}, generator, on_gen.dtype(at::kLong));
  return {inputs.to(device_), targets.to(device_)};
}

torch::Tensor ToyModel::loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return at::cross_entropy_loss(logits, targets);
}

std::vector<runner::NamedTensor> ToyModel::forward_traced(const torch::Tensor& inputs) {
  const ToyForwardTrace t = net_->forward_traced(inputs);
  return {{"fc1_output", t.fc1_output},
          {"relu_output", t.relu_output},
          {"layer_norm_output", t.layer_norm_output},
          {"logits", t.logits}};
}

}  // namespace plugins::toy
