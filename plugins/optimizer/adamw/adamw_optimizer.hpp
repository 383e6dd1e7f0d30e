// AdamW with decoupled weight decay (Loshchilov & Hutter), numerically the same
// recipe as torch.optim.AdamW's default multi-tensor ("foreach") path. Per step t
// and parameter p with gradient g:
//   p <- p * (1 - lr * weight_decay)
//   m <- beta1 m + (1 - beta1) g            (as lerp(m, g, 1 - beta1))
//   v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Each line is one multi-tensor ATen op over every parameter of a group that has
// a gradient, so a step costs a handful of kernel launches, not a few per tensor.
// State per parameter is LibTorch's AdamWParamState (step, exp_avg, exp_avg_sq).
// Not supported: amsgrad, sparse gradients, capture in a CUDA graph (the bias
// corrections are host scalars that change every step).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/optim/adamw.h>

namespace plugins::adamw {

// Throws std::invalid_argument for lr/eps/weight_decay < 0, betas outside [0, 1), amsgrad.
void check_options(const torch::optim::AdamWOptions& options);

// check_options on every group, which must carry AdamWOptions (both AdamW classes).
void check_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups);

// The closure's loss, computed with gradients on (the step itself runs without);
// an undefined tensor without a closure.
torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure);

class AdamW : public torch::optim::Optimizer {
 public:
  // Groups without options take `defaults`; groups with options must carry AdamWOptions.
  AdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, const torch::optim::AdamWOptions& defaults);

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Bytes of the moment tensors (exp_avg + exp_avg_sq) allocated so far; they
  // are created lazily on a parameter's first step, as in PyTorch.
  std::int64_t state_bytes() const;
};

}  // namespace plugins::adamw
