// AdamW on the fused kernel of kernels/adamw: one pass over each parameter, its
// gradient and both moments, a few launches for all parameters. Same numerics as
// torch::optim::AdamW (and this plugin's foreach AdamW). The step count lives on the
// device next to each parameter, so step() can be captured in a CUDA graph; once
// captured, lr and the other hyperparameters are fixed in the graph.
// On CPU tensors the kernel's tensor-op reference runs instead. A parameter with a
// registered low-precision working copy (runner/weight_copies.hpp: the transformer_lm
// keeps one per matmul weight under bf16/fp16 autocast) gets it rewritten in the same pass.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/optim/adamw.h>

namespace plugins::adamw {

// AdamWParamState plus the step count as an fp32 device scalar (the host step()
// counter is kept too, but a graph replay does not advance it).
struct FusedAdamWParamState : torch::optim::AdamWParamState {
  torch::Tensor device_step;
  std::unique_ptr<OptimizerParamState> clone() const override {
    return std::make_unique<FusedAdamWParamState>(*this);
  }
};

class FusedAdamW : public torch::optim::Optimizer {
 public:
  FusedAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, const torch::optim::AdamWOptions& defaults);
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace plugins::adamw
