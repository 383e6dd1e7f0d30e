// A model maps a batch of inputs to outputs and a scalar loss. It owns its
// torch::nn::Module, so data-parallel wrappers and optimizers can reach its parameters.
#pragma once
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "runner/plugin.hpp"

namespace runner {

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

class Model : public PluginBase {
 public:
  ~Model() override;
  virtual torch::nn::Module& module() = 0;
  // A random batch of `batch_size` examples on the model's device.
  virtual Batch random_batch(std::int64_t batch_size, torch::Generator& generator) = 0;
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& targets) = 0;
  // One forward pass with the intermediate results the model chooses to expose, in
  // order, the output last (for dtype and shape studies). Default: only {"output", forward(inputs)}.
  virtual std::vector<NamedTensor> forward_traced(const torch::Tensor& inputs);
};

}  // namespace runner
