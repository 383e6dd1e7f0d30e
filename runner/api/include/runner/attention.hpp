// Attention: softmax(q k^T / sqrt(d) + mask) v, differentiable through autograd.
// Shapes: q [..., Lq, d], k and v [..., Lk, d] -> [..., Lq, d]; leading dims are batch
// (and heads). Implementations name their inner steps with runner::ScopedRange.
#pragma once
#include <cstdint>
#include <string>

#include <torch/types.h>

#include "runner/plugin.hpp"

namespace runner {

// Which keys query i sees (top-left aligned, as at::scaled_dot_product_attention's is_causal):
//   none: every key; causal: j <= i; sliding_window: i - window < j <= i (itself and the
//   window - 1 keys before it).
// An implementation that cannot apply a kind throws runner::SkipPoint naming it.
struct AttentionMask {
  enum class Kind { none, causal, sliding_window };
  Kind kind = Kind::none;
  std::int64_t window = 0;  // sliding_window only, >= 1

  static AttentionMask none() { return {}; }
  static AttentionMask causal() { return {Kind::causal, 0}; }
  static AttentionMask sliding_window(std::int64_t keys) { return {Kind::sliding_window, keys}; }
  // Keys right of the diagonal are hidden (causal and sliding_window).
  bool hides_future() const { return kind != Kind::none; }
  // "none", "causal" or "sliding_window 128", for records and messages.
  std::string describe() const {
    if (kind == Kind::sliding_window) return "sliding_window " + std::to_string(window);
    return kind == Kind::causal ? "causal" : "none";
  }
};

class Attention : public PluginBase {
 public:
  ~Attention() override;
  virtual torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const AttentionMask& mask) = 0;
  // What actually ran for the last forward, for records (e.g. "sdpa: flash backend",
  // "CUDA kernels: mma.sync bf16"); empty when there is nothing to add to the name.
  virtual std::string mechanism() const { return {}; }
};

}  // namespace runner
