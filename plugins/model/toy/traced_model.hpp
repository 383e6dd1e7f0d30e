// What other plugins may use of the toy model: its traced forward. Kept apart
// from toy_model.hpp so a consumer sees only this header-only interface and no
// inline ToyModel methods (which would need the toy plugin's symbols at link time).
#pragma once
#include <torch/types.h>

namespace plugins::toy {

struct ToyForwardTrace {
  torch::Tensor fc1_output;
  torch::Tensor relu_output;
  torch::Tensor layer_norm_output;
  torch::Tensor logits;
};

// Header-only interface (inline virtuals, so no library defines its typeinfo):
// a task can reach it from a runner::Model* with dynamic_cast without linking
// this plugin. libstdc++ matches typeinfo by name across shared libraries.
class TracedModel {
 public:
  virtual ~TracedModel() = default;
  virtual ToyForwardTrace forward_traced(const torch::Tensor& inputs) = 0;
};

}  // namespace plugins::toy
