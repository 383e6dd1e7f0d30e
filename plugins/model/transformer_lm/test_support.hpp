// Test helpers: a custom-size model built directly (no plugin registry) with
// at::scaled_dot_product_attention standing in for the attention plugin.
#pragma once
#include <memory>

#include <ATen/ops/scaled_dot_product_attention.h>

#include "transformer_lm.hpp"

namespace plugins::transformer_lm::testing {

class SdpaAttention : public runner::Attention {
 public:
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override {
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, mask.hides_future());
  }
};

inline TransformerDims tiny_dims() {
  TransformerDims d;
  d.vocab_size = 101;
  d.context_length = 16;
  d.d_model = 64;
  d.d_ff = 128;
  d.num_layers = 2;
  d.num_heads = 4;
  return d;
}

inline std::unique_ptr<TransformerLM> tiny_model(std::uint64_t seed = 0, TransformerDims dims = tiny_dims()) {
  return std::make_unique<TransformerLM>(dims, std::make_unique<SdpaAttention>(), c10::Device(c10::kCPU), seed);
}

}  // namespace plugins::transformer_lm::testing
