// A model maps a batch of inputs to outputs and a scalar loss. It owns its
// torch::nn::Module, so data-parallel wrappers and optimizers can reach its parameters.
#pragma once
#include <torch/nn/module.h>
#include <torch/types.h>

#include "runner/plugin.hpp"

namespace runner {

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class Model : public PluginBase {
 public:
  ~Model() override;
  virtual torch::nn::Module& module() = 0;
  // A random batch of `batch_size` examples on the model's device.
  virtual Batch random_batch(std::int64_t batch_size, torch::Generator& generator) = 0;
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& targets) = 0;
};

}  // namespace runner
