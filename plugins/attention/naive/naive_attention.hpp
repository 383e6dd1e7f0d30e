// Naive attention: softmax(q k^T / sqrt(d) + causal mask) v as three plain tensor ops,
// differentiated by autograd.
//
// Shapes: q [..., Lq, d], k and v [..., Lk, d] -> [..., Lq, d].
// Causal mask: key j is hidden from query i when j > i (top-left aligned, as
// at::scaled_dot_product_attention's is_causal); hidden scores become -inf.
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
                        bool is_causal) override;

  // True above the diagonal (the positions to hide), [Lq, Lk] bool on `device`.
  // Built once per (Lq, Lk, device) and reused.
  const torch::Tensor& causal_mask(std::int64_t query_len, std::int64_t key_len,
                                   const c10::Device& device);

 private:
  using MaskKey = std::tuple<std::int64_t, std::int64_t, c10::DeviceType, c10::DeviceIndex>;
  std::map<MaskKey, torch::Tensor> masks_;
};

}  // namespace plugins::naive_attention
