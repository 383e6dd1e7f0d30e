// An optimizer plugin is a factory: given parameters it builds a torch::optim::Optimizer.
// Being a factory lets wrappers (e.g. optimizer-state sharding) build one inner
// optimizer per shard of the parameters.
#pragma once
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "runner/plugin.hpp"

namespace runner {

class OptimizerFactory : public PluginBase {
 public:
  ~OptimizerFactory() override;
  virtual std::unique_ptr<torch::optim::Optimizer> make(
      std::vector<torch::optim::OptimizerParamGroup> groups) = 0;
  // True when the optimizers it makes can have step() captured in a CUDA graph
  // and replayed (no host-side values that change between steps), which
  // task/train_step's cuda_graph option needs.
  virtual bool supports_graph_capture() const { return false; }
};

}  // namespace runner
