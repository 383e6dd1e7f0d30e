#include "rope/rope.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/autograd.h>

#include "common/dtype.hpp"
#include "rope/rope_launch.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::rope {
namespace {

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin) {
  if (q.dim() != 4 || q.sizes() != k.sizes() || q.scalar_type() != k.scalar_type())
    throw std::invalid_argument("rope: q and k must be [batch, seq, heads, d_head] of one shape and dtype");
  if (q.size(3) % 2 != 0) throw std::invalid_argument("rope: d_head must be even");
  if (cos.dim() != 2 || cos.sizes() != sin.sizes() || cos.size(0) < q.size(1) || cos.size(1) != q.size(3) / 2)
    throw std::invalid_argument("rope: cos/sin must be [>= seq, d_head / 2]");
}

#ifdef RUNNER_WITH_CUDA
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

// x [batch, seq, heads, d_head] with d_head contiguous, as the kernel's strided view.
PartView view_of(const at::Tensor& in, const at::Tensor& out) {
  return {in.data_ptr(), out.data_ptr(), in.stride(0), in.stride(1), in.stride(2),
          out.stride(0), out.stride(1), out.stride(2)};
}

std::tuple<at::Tensor, at::Tensor> rotate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                          const at::Tensor& sin, float sign) {
  const at::Tensor qc = q.contiguous(), kc = k.to(q.scalar_type()).contiguous();
  const at::Tensor c = cos.to(at::kFloat).contiguous(), s = sin.to(at::kFloat).contiguous();
  at::Tensor q_out = at::empty_like(qc), k_out = at::empty_like(kc);
  const PartView parts[2] = {view_of(qc, q_out), view_of(kc, k_out)};
  launch_rope(parts, 2, 2, c.data_ptr<float>(), s.data_ptr<float>(), q.size(0), q.size(1), q.size(2), q.size(3), sign,
              dtype_of(q, "rope"), stream_of(q));
  return {q_out, k_out};
}

class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin) {
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    auto [q_out, k_out] = rotate(q, k, cos, sin, 1.0f);
    return {q_out, k_out};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor cos = ctx->saved_data["cos"].toTensor(), sin = ctx->saved_data["sin"].toTensor();
    // An output the loss does not use gets an undefined gradient.
    at::Tensor gq = grads[0].defined() ? grads[0] : at::zeros_like(grads[1]);
    at::Tensor gk = grads[1].defined() ? grads[1] : at::zeros_like(grads[0]);
    auto [dq, dk] = rotate(gq, gk, cos, sin, -1.0f);
    return {dq, dk, at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

at::Tensor rope_reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const std::int64_t seq = x.size(1);
  // [seq, 1, half]: broadcast over batch and heads.
  const at::Tensor c = cos.narrow(0, 0, seq).to(at::kFloat).unsqueeze(1);
  const at::Tensor s = sin.narrow(0, 0, seq).to(at::kFloat).unsqueeze(1);
  const at::Tensor pairs = x.to(at::kFloat).unflatten(-1, {x.size(-1) / 2, 2});
  const at::Tensor even = pairs.select(-1, 0), odd = pairs.select(-1, 1);
  return at::stack({even * c - odd * s, even * s + odd * c}, -1).flatten(-2).to(x.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> rope_qk(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                           const at::Tensor& sin) {
  check_shapes(q, k, cos, sin);
#ifdef RUNNER_WITH_CUDA
  if (q.is_cuda() && q.numel() > 0) {
    dtype_of(q, "rope");
    auto out = RopeFunction::apply(q, k, cos, sin);
    return {out[0], out[1]};
  }
#endif
  return {rope_reference(q, cos, sin), rope_reference(k, cos, sin)};
}

namespace {

void check_tables(const at::Tensor& cos, const at::Tensor& sin, std::int64_t seq, std::int64_t d_head) {
  if (cos.dim() != 2 || cos.sizes() != sin.sizes() || cos.size(0) < seq || cos.size(1) != d_head / 2)
    throw std::invalid_argument("rope: cos/sin must be [>= seq, d_head / 2]");
}

}  // namespace

void rope_qkv_(const at::Tensor& qkv, std::int64_t heads, const at::Tensor& cos, const at::Tensor& sin) {
  if (qkv.dim() != 3 || !qkv.is_contiguous() || heads <= 0 || qkv.size(2) % (3 * heads) != 0 ||
      (qkv.size(2) / (3 * heads)) % 2 != 0)
    throw std::invalid_argument("rope_qkv_: qkv must be contiguous [batch, seq, 3 * heads * d_head], d_head even");
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1), d_head = qkv.size(2) / (3 * heads);
  check_tables(cos, sin, seq, d_head);
  const at::Tensor split = qkv.view({batch, seq, 3, heads, d_head});
  const at::Tensor q = split.select(2, 0), k = split.select(2, 1);
#ifdef RUNNER_WITH_CUDA
  if (qkv.is_cuda() && qkv.numel() > 0) {
    const at::Tensor c = cos.to(at::kFloat).contiguous(), s = sin.to(at::kFloat).contiguous();
    const PartView parts[2] = {view_of(q, q), view_of(k, k)};
    launch_rope(parts, 2, 2, c.data_ptr<float>(), s.data_ptr<float>(), batch, seq, heads, d_head, 1.0f,
                dtype_of(qkv, "rope"), stream_of(qkv));
    return;
  }
#endif
  c10::NoGradGuard no_grad;
  q.copy_(rope_reference(q, cos, sin));
  k.copy_(rope_reference(k, cos, sin));
}

at::Tensor rope_qkv_backward(const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& cos,
                             const at::Tensor& sin) {
  if (dq.dim() != 4 || dk.sizes() != dq.sizes() || dv.sizes() != dq.sizes() || dq.size(3) % 2 != 0)
    throw std::invalid_argument("rope_qkv_backward: dq, dk, dv must be [batch, seq, heads, d_head] of one shape");
  const std::int64_t batch = dq.size(0), seq = dq.size(1), heads = dq.size(2), d_head = dq.size(3);
  check_tables(cos, sin, seq, d_head);
  at::Tensor dqkv = at::empty({batch, seq, 3 * heads * d_head}, dq.options());
  const at::Tensor split = dqkv.view({batch, seq, 3, heads, d_head});
#ifdef RUNNER_WITH_CUDA
  if (dq.is_cuda() && dq.numel() > 0) {
    // Any strides with d_head contiguous (e.g. the attention backward's [b, h, s, d] results seen as [b, s, h, d]).
    auto readable = [&](const at::Tensor& t) {
      const at::Tensor same = t.to(dq.scalar_type());
      return same.stride(3) == 1 ? same : same.contiguous();
    };
    const at::Tensor q = readable(dq), k = readable(dk), v = readable(dv);
    const at::Tensor c = cos.to(at::kFloat).contiguous(), s = sin.to(at::kFloat).contiguous();
    const PartView parts[3] = {view_of(q, split.select(2, 0)), view_of(k, split.select(2, 1)),
                               view_of(v, split.select(2, 2))};
    launch_rope(parts, 3, 2, c.data_ptr<float>(), s.data_ptr<float>(), batch, seq, heads, d_head, -1.0f,
                dtype_of(dq, "rope"), stream_of(dq));
    return dqkv;
  }
#endif
  c10::NoGradGuard no_grad;
  split.select(2, 0).copy_(rope_reference(dq, cos, -sin));
  split.select(2, 1).copy_(rope_reference(dk, cos, -sin));
  split.select(2, 2).copy_(dv);
  return dqkv;
}

}  // namespace kernels::rope
