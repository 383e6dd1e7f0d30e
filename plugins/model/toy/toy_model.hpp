// The toy model of benchmarking_mixed_precision (a):
//   fc1 = Linear(in_features, 10, no bias) -> ReLU -> LayerNorm(10) -> fc2 = Linear(10, out_features, no bias)
// Loss: cross-entropy against integer class targets. No explicit casts anywhere,
// so under autocast every tensor has the dtype autocast gives it; forward_traced()
// exposes the intermediates so a task can read those dtypes.
#pragma once
#include <cstdint>
#include <memory>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include "runner/model.hpp"

namespace plugins::toy {

struct ToyForwardTrace {
  torch::Tensor fc1_output;
  torch::Tensor relu_output;
  torch::Tensor layer_norm_output;
  torch::Tensor logits;
};

class ToyNet : public torch::nn::Module {
 public:
  ToyNet(std::int64_t in_features, std::int64_t out_features, const c10::Device& device, at::Generator& gen);
  ToyForwardTrace forward_traced(const torch::Tensor& x) const;

  torch::Tensor fc1_weight;  // "fc1.weight" [10, in_features]
  torch::Tensor ln_weight;   // "ln.weight" [10]
  torch::Tensor ln_bias;     // "ln.bias" [10]
  torch::Tensor fc2_weight;  // "fc2.weight" [out_features, 10]
};

class ToyModel : public runner::Model {
 public:
  static constexpr std::int64_t kHiddenFeatures = 10;

  ToyModel(std::int64_t in_features, std::int64_t out_features, const c10::Device& device, std::uint64_t seed);

  torch::nn::Module& module() override { return *net_; }
  // inputs: N(0,1) floats [B, in_features]; targets: classes in [0, out_features).
  runner::Batch random_batch(std::int64_t batch_size, torch::Generator& generator) override;
  torch::Tensor forward(const torch::Tensor& inputs) override { return net_->forward_traced(inputs).logits; }
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) override;
  // fc1_output, relu_output, layer_norm_output, logits (the public runner::Model view).
  std::vector<runner::NamedTensor> forward_traced(const torch::Tensor& inputs) override;
  ToyForwardTrace trace(const torch::Tensor& inputs) { return net_->forward_traced(inputs); }

 private:
  std::int64_t in_features_, out_features_;
  c10::Device device_;
  std::shared_ptr<ToyNet> net_;
};

}  // namespace plugins::toy
