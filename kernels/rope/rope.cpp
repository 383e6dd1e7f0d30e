#include "rope/rope.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
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
std::tuple<at::Tensor, at::Tensor> rotate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                          const at::Tensor& sin, float sign) {
  const at::Tensor qc = q.contiguous(), kc = k.to(q.scalar_type()).contiguous();
  const at::Tensor c = cos.to(at::kFloat).contiguous(), s = sin.to(at::kFloat).contiguous();
  at::Tensor q_out = at::empty_like(qc), k_out = at::empty_like(kc);
  launch_rope(qc.data_ptr(), kc.data_ptr(), q_out.data_ptr(), k_out.data_ptr(), c.data_ptr<float>(),
              s.data_ptr<float>(), q.size(0), q.size(1), q.size(2), q.size(3), sign, dtype_of(q, "rope"),
              at::cuda::getCurrentCUDAStream(q.device().index()).stream());
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

}  // namespace kernels::rope
