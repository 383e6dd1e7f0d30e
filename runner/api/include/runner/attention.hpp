// Attention: softmax(q k^T / sqrt(d) + causal mask) v, differentiable through autograd.
// Shapes: q [..., Lq, d], k and v [..., Lk, d] -> [..., Lq, d]; leading dims are batch
// (and heads). Implementations name their inner steps with runner::ScopedRange.
#pragma once
#include <string>

#include <torch/types.h>

#include "runner/plugin.hpp"

namespace runner {

class Attention : public PluginBase {
 public:
  ~Attention() override;
  virtual torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool is_causal) = 0;
  // What actually ran for the last forward, for records (e.g. "sdpa: flash backend",
  // "CUDA kernels: mma.sync bf16"); empty when there is nothing to add to the name.
  virtual std::string mechanism() const { return {}; }
};

}  // namespace runner
