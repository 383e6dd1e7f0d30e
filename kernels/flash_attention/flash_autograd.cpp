// The differentiable op (attention: an autograd Function over forward_bshd / backward_bshd),
// the [..., seq, d] entry points and the tensor-op reference the CPU path runs.
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include "flash_attention.hpp"
#include "runner/range.hpp"

namespace kernels::flash {

namespace {

// [..., seq, d] as [bh, seq, 1, d] (a view where the strides allow it).
at::Tensor as_bshd(const at::Tensor& t) { return t.reshape({-1, t.size(-2), 1, t.size(-1)}); }

}  // namespace

ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                      const Options& options) {
  check_inputs(q, k, v);
  ForwardResult r = forward_bshd(as_bshd(q), as_bshd(k), as_bshd(v), mask, options);
  r.out = r.out.view(q.sizes());
  std::vector<std::int64_t> lse_shape(q.sizes().begin(), q.sizes().end() - 1);
  r.lse = r.lse.view(lse_shape);
  return r;
}

ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                      KernelFamily family) {
  Options o;
  o.family = family;
  return forward(q, k, v, mask, o);
}

Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, const Options& options) {
  check_inputs(q, k, v);
  TORCH_CHECK(out.sizes() == q.sizes() && dout.sizes() == q.sizes(),
              "flash attention backward: out and dout must have q's shape ", q.sizes(), ", got ", out.sizes(), " and ",
              dout.sizes());
  TORCH_CHECK(lse.scalar_type() == at::kFloat && lse.numel() * q.size(-1) == q.numel() && lse.is_contiguous(),
              "flash attention backward: lse must be the forward's fp32 [..., lq] tensor");
  Gradients g = backward_bshd(as_bshd(q), as_bshd(k), as_bshd(v), as_bshd(out), as_bshd(dout), lse, mask, options);
  return {g.dq.view(q.sizes()), g.dk.view(k.sizes()), g.dv.view(v.sizes())};
}

Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, KernelFamily family) {
  Options o;
  o.family = family;
  return backward(q, k, v, out, dout, lse, mask, o);
}

namespace {

// [lq, lk] bool: true where the mask hides key j from query i (the rule of mask.hpp in tensor ops).
at::Tensor hidden_scores(const Mask& mask, std::int64_t lq, std::int64_t lk, const at::Device& device) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query = at::arange(lq, opts).unsqueeze(1), key = at::arange(lk, opts).unsqueeze(0);
  at::Tensor hide = at::zeros({lq, lk}, opts.dtype(at::kBool));
  if (mask.causal()) hide = hide | (key > query);
  if (mask.windowed()) hide = hide | (key <= query - mask.window);
  return hide;
}

}  // namespace

at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "flash attention reference: q, k, v must be [batch, seq, heads, d]");
  check_mask(mask);
  const auto math = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto qh = q.to(math).transpose(1, 2), kh = k.to(math).transpose(1, 2), vh = v.to(math).transpose(1, 2);
  auto s = at::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor p;
  if (mask.kind == MaskKind::none) {
    p = at::softmax(s, -1);
  } else {
    // A row that sees no key (a query at or past lk + window - 1 under a sliding window)
    // gives zeros, as the kernels do: its scores become 0 before the softmax (no NaN, forward
    // or backward) and its probabilities 0 after.
    const at::Tensor hide = hidden_scores(mask, q.size(1), k.size(1), s.device());
    const at::Tensor empty_row = hide.all(-1, /*keepdim=*/true);
    p = at::softmax(s.masked_fill(hide, -INFINITY).masked_fill(empty_row, 0.0), -1).masked_fill(empty_row, 0.0);
  }
  const auto o = at::matmul(p, vh);  // [batch, heads, lq, d]
  return o.transpose(1, 2).reshape({q.size(0), q.size(1), q.size(2) * q.size(3)}).to(q.scalar_type());
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The saved options travel as integers (AutogradContext::saved_data holds IValues).
std::vector<std::int64_t> pack(const Options& o) {
  return {static_cast<std::int64_t>(o.family), static_cast<std::int64_t>(o.forward_schedule), o.tma_loads,
          o.pingpong, static_cast<std::int64_t>(o.backward_schedule), o.head_group,
          o.backward_pingpong, static_cast<std::int64_t>(o.persistent_forward),
          static_cast<std::int64_t>(o.persistent_backward), o.forward_query_tile};
}
Options unpack(const std::vector<std::int64_t>& v) {
  Options o;
  o.family = static_cast<KernelFamily>(v[0]);
  o.forward_schedule = static_cast<ForwardSchedule>(v[1]);
  o.tma_loads = v[2] != 0;
  o.pingpong = v[3] != 0;
  o.backward_schedule = static_cast<BackwardSchedule>(v[4]);
  o.head_group = static_cast<int>(v[5]);
  o.backward_pingpong = v[6] != 0;
  o.persistent_forward = static_cast<Options::Persistent>(v[7]);
  o.persistent_backward = static_cast<Options::Persistent>(v[8]);
  o.forward_query_tile = static_cast<int>(v[9]);
  return o;
}
std::vector<std::int64_t> pack(const Mask& m) { return {static_cast<std::int64_t>(m.kind), m.window}; }
Mask unpack_mask(const std::vector<std::int64_t>& v) {
  return Mask::of(static_cast<MaskKind>(v[0]), static_cast<int>(v[1]));
}

struct AttentionFunction : torch::autograd::Function<AttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            std::vector<std::int64_t> mask, std::vector<std::int64_t> options) {
    runner::ScopedRange range("attention/flash_forward");
    ForwardResult r = forward_bshd(q, k, v, unpack_mask(mask), unpack(options));
    ctx->save_for_backward({q, k, v, r.out, r.lse});
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["options"] = options;
    // [batch, lq, heads, d]: a gradient that arrives through a head-split view (a transpose)
    // then needs no copy to be read as [batch, lq, heads, d].
    return r.out.view(q.sizes());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    runner::ScopedRange range("attention/flash_backward");  // on autograd's device thread
    const auto s = ctx->get_saved_variables();
    Gradients g = backward_bshd(s[0], s[1], s[2], s[3], grads[0], s[4], unpack_mask(ctx->saved_data["mask"].toIntVector()),
                                unpack(ctx->saved_data["options"].toIntVector()));
    return {g.dq, g.dk, g.dv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                     const Options& options, bool merge_heads) {
  at::Tensor out = q.is_cuda() ? AttentionFunction::apply(q, k, v, pack(mask), pack(options))
                               : attention_reference(q, k, v, mask).view(q.sizes());
  return merge_heads ? out.flatten(2) : out;
}

}  // namespace kernels::flash
