// Naive attention: softmax(q k^T / sqrt(d) + mask) v as three plain tensor ops,
// differentiated by autograd.
//
// Shapes: q [..., Lq, d], k and v [..., Lk, d] -> [..., Lq, d].
// Masks (runner::AttentionMask): causal hides key j from query i when j > i (top-left aligned,
// as at::scaled_dot_product_attention's is_causal), a sliding window also when j <= i - window;
// hidden scores become -inf (a row that sees no key gives NaN, as the textbook formula does).
// Cost: 2*Lq*Lk*d FLOPs per matmul (two of them) per leading index; backward keeps
// the softmax output [..., Lq, Lk] alive, which is what runs out of memory first.
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

#include "runner/attention.hpp"

namespace plugins::naive_attention {

class NaiveAttention : public runner::Attention {
 public:
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override;

  // True where `mask` hides key j from query i (the positions to hide), [Lq, Lk] bool on
  // `device`; `mask` hides something (not none). Built once per (mask, Lq, Lk, device) and reused.
  const torch::Tensor& hidden(const runner::AttentionMask& mask, std::int64_t query_len, std::int64_t key_len,
                              const c10::Device& device);

 private:
  using MaskKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, c10::DeviceType, c10::DeviceIndex>;
  std::map<MaskKey, torch::Tensor> masks_;
};

}  // namespace plugins::naive_attention
