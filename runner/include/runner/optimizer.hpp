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
};

}  // namespace runner
