// Data-parallel strategy: wraps a module for training on ctx.dist.world_size ranks.
// Protocol: attach() once (broadcast weights, register gradient hooks); the task runs
// forward and backward; finish_gradient_synchronization() before optimizer.step().
#pragma once
#include <torch/nn/module.h>

#include "runner/context.hpp"
#include "runner/record.hpp"

namespace runner {

class DataParallel : public PluginBase {
 public:
  ~DataParallel() override;
  virtual void attach(torch::nn::Module& module, Context& ctx) = 0;
  virtual void finish_gradient_synchronization() = 0;
  // Adds strategy metrics (e.g. communication time) to the step's record.
  virtual void report(Record& record) { (void)record; }
};

}  // namespace runner
