// An optimizer plugin is a factory. Tasks call build() and hold a runner::Optimizer:
// step, zero_grad, add_param_group and the bytes of state this rank keeps.
//
// Why not torch::optim::Optimizer directly: its add_param_group() and state() are
// not virtual, so a wrapper (optimizer-state sharding) cannot intercept new
// groups by inheriting. A wrapper instead overrides build() and owns the inner
// optimizers it makes with other factories' make().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "runner/plugin.hpp"

namespace runner {

class Optimizer {
 public:
  virtual ~Optimizer();
  virtual void step() = 0;
  virtual void zero_grad(bool set_to_none = true) = 0;
  // The group's options (if any) must suit the optimizer, as with torch::optim.
  virtual void add_param_group(const torch::optim::OptimizerParamGroup& group) = 0;
  // Bytes of per-parameter state (moments, momentum buffers) held by this rank.
  virtual std::int64_t state_bytes() const = 0;
};

// A runner::Optimizer over one torch::optim::Optimizer.
class TorchOptimizer : public Optimizer {
 public:
  explicit TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> inner) : inner_(std::move(inner)) {}
  void step() override { inner_->step(); }
  void zero_grad(bool set_to_none = true) override { inner_->zero_grad(set_to_none); }
  void add_param_group(const torch::optim::OptimizerParamGroup& group) override { inner_->add_param_group(group); }
  std::int64_t state_bytes() const override;
  torch::optim::Optimizer& inner() { return *inner_; }

 private:
  std::unique_ptr<torch::optim::Optimizer> inner_;
};

// State bytes of LibTorch's param-state types (Adam, AdamW, SGD momentum, and
// optimizers that reuse them); other state types count 0.
std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

class OptimizerFactory : public PluginBase {
 public:
  ~OptimizerFactory() override;
  // A plain optimizer over `groups` (a group may have no parameters yet).
  virtual std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::optim::OptimizerParamGroup> groups) = 0;
  // What tasks use; wrappers override it.
  virtual std::unique_ptr<Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) {
    return std::make_unique<TorchOptimizer>(make(std::move(groups)));
  }
  // True when the optimizers it makes can have step() captured in a CUDA graph
  // and replayed (no host-side values that change between steps), which
  // task/train_step's cuda_graph option needs.
  virtual bool supports_graph_capture() const { return false; }
};

}  // namespace runner
