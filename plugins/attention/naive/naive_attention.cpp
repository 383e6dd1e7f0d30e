#include "naive_attention.hpp"

#include <cmath>
#include <limits>

#include <ATen/ops/masked_fill.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>

#include "runner/range.hpp"

namespace plugins::naive_attention {

const torch::Tensor& NaiveAttention::hidden(const runner::AttentionMask& mask, std::int64_t query_len,
                                            std::int64_t key_len, const c10::Device& device) {
  const MaskKey key{static_cast<int>(mask.kind), mask.window, query_len, key_len, device.type(), device.index()};
  auto it = masks_.find(key);
  if (it == masks_.end()) {
    torch::Tensor ones = at::ones({query_len, key_len}, at::TensorOptions().dtype(at::kBool).device(device));
    torch::Tensor hide = at::triu(ones, /*diagonal=*/1);
    if (mask.kind == runner::AttentionMask::Kind::sliding_window)  // and keys window or more behind
      hide = hide | at::tril(ones, /*diagonal=*/-mask.window);
    it = masks_.emplace(key, hide).first;
  }
  return it->second;
}

torch::Tensor NaiveAttention::forward(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const runner::AttentionMask& mask) {
  TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim(),
              "naive attention: q, k, v need the same rank >= 2, got ", q.sizes(), ", ", k.sizes(), ", ",
              v.sizes());
  TORCH_CHECK(q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
              "naive attention: shape mismatch q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(mask.kind != runner::AttentionMask::Kind::sliding_window || mask.window >= 1,
              "naive attention: a sliding window needs window >= 1, got ", mask.window);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));

  // Out-of-place ops on purpose: this is the reference the fused versions are
  // measured against, so it keeps the textbook's temporaries.
  torch::Tensor scores;
  {
    runner::ScopedRange range("attention/scores");
    scores = at::matmul(q, k.transpose(-2, -1)) * scale;
    if (mask.hides_future()) {
      scores = at::masked_fill(scores, hidden(mask, q.size(-2), k.size(-2), q.device()),
                               -std::numeric_limits<double>::infinity());
    }
  }
  torch::Tensor probs;
  {
    runner::ScopedRange range("attention/softmax");
    probs = at::softmax(scores, -1);
  }
  runner::ScopedRange range("attention/weighted_sum");
  return at::matmul(probs, v);
}

}  // namespace plugins::naive_attention
