#include "modules.hpp"

#include <cmath>
#include <vector>

#include <ATen/autocast_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>
#include <torch/autograd.h>

#include "rmsnorm/rmsnorm.hpp"
#include "rope/rope.hpp"
#include "runner/range.hpp"
#include "runner/weight_copies.hpp"
#include "swiglu/swiglu.hpp"

namespace plugins::transformer_lm {
namespace {

at::TensorOptions fp32_on(const c10::Device& device) { return at::TensorOptions().dtype(at::kFloat).device(device); }

double standard_normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

// y = x copy^T with the weight's gradient in fp32: the autocast matmul without its casts.
class LowPrecisionLinear : public torch::autograd::Function<LowPrecisionLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& copy) {
    const torch::Tensor xl = x.scalar_type() == copy.scalar_type() ? x : x.to(copy.scalar_type());
    ctx->save_for_backward({xl, copy});
    (void)weight;  // an input only so that autograd routes dW to it
    return at::linear(xl, copy);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &xl = saved[0], &copy = saved[1];
    const torch::Tensor dy = grads[0].to(copy.scalar_type());
    const torch::Tensor dx = at::matmul(dy, copy);
    const torch::Tensor dw = at::mm(dy.reshape({-1, dy.size(-1)}).t(), xl.reshape({-1, xl.size(-1)}), at::kFloat);
    return {dx, dw, torch::Tensor()};
  }
};

torch::Tensor low_precision_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& copy) {
  return LowPrecisionLinear::apply(x, weight, copy);
}

// The backward of out = xl w^T for a packed w = [W_0; ...; W_{n-1}] (n row blocks of equal
// height): {dx, dW_0, ..., dW_{n-1}} from d(out), one matmul for dx and one for dW (in fp32,
// from bf16/fp16 operands without a cast kernel), whose row blocks are the weights' gradients.
torch::autograd::variable_list packed_linear_backward(const torch::Tensor& dout, const torch::Tensor& xl,
                                                      const torch::Tensor& w, std::int64_t blocks) {
  const torch::Tensor d = dout.to(w.scalar_type());
  const torch::Tensor d2 = d.reshape({-1, d.size(-1)}), x2 = xl.reshape({-1, xl.size(-1)});
  const torch::Tensor dw = w.scalar_type() == at::kFloat ? at::mm(d2.t(), x2) : at::mm(d2.t(), x2, at::kFloat);
  torch::autograd::variable_list out{at::matmul(d, w)};
  const std::int64_t rows = dw.size(0) / blocks;
  for (std::int64_t i = 0; i < blocks; ++i) out.push_back(dw.narrow(0, i * rows, rows));
  return out;
}

// A tensor sharing `view`'s memory, sizes and strides without being an autograd view of
// its base: the fused QKV function's outputs alias its one qkv buffer, which autograd never sees.
torch::Tensor alias_of(const torch::Tensor& view) {
  return at::empty({0}, view.options()).set_(view.storage(), view.storage_offset(), view.sizes(), view.strides());
}

// q, k, v = split(rope_qk(x packed^T)): the three projections as one matmul into one
// [B, T, 3 d] buffer, RoPE applied to its q and k parts in place, and q, k, v returned as
// [B, T, H, d_head] strided views of it (attention reads them as they are). packed: the
// [3 d, d] weight the matmul reads (PackedWeights); wq, wk, wv are inputs only so that
// autograd routes their gradients. Backward: one kernel turns dq, dk, dv into dqkv (inverse
// rotation, v passed through), then packed_linear_backward, so no gradient add and no
// layout copy remains.
class QkvRope : public torch::autograd::Function<QkvRope> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& wq, const torch::Tensor& wk,
                                                const torch::Tensor& wv, const torch::Tensor& packed,
                                                const torch::Tensor& cos, const torch::Tensor& sin,
                                                std::int64_t heads) {
    (void)wk, (void)wv;
    const torch::Tensor& w = packed;
    const torch::Tensor xl = x.scalar_type() == w.scalar_type() ? x : x.to(w.scalar_type());
    const torch::Tensor qkv = at::linear(xl, w).contiguous();
    kernels::rope::rope_qkv_(qkv, heads, cos, sin);
    ctx->save_for_backward({xl, w});
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    const torch::Tensor split = qkv.view({x.size(0), x.size(1), 3, heads, wq.size(0) / heads});
    return {alias_of(split.select(2, 0)), alias_of(split.select(2, 1)), alias_of(split.select(2, 2))};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &xl = saved[0], &w = saved[1];
    const torch::Tensor any = grads[0].defined() ? grads[0] : grads[1].defined() ? grads[1] : grads[2];
    auto grad = [&](int i) { return grads[i].defined() ? grads[i] : at::zeros_like(any); };
    const torch::Tensor dqkv = kernels::rope::rope_qkv_backward(grad(0), grad(1), grad(2),
                                                                ctx->saved_data["cos"].toTensor(),
                                                                ctx->saved_data["sin"].toTensor());
    torch::autograd::variable_list out = packed_linear_backward(dqkv, xl, w, 3);
    out.resize(8);  // no gradients for packed, cos, sin, heads
    return out;
  }
};

// silu(a) * b for [a | b] = x packed^T: w1 x and w3 x from one matmul into one [B, T, 2 d_ff]
// buffer, the activation over its two halves in one kernel; backward: one kernel writes
// [da | db], then packed_linear_backward (dx with no gradient add, [dW1; dW3]).
class PackedSwiGLU : public torch::autograd::Function<PackedSwiGLU> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& w3, const torch::Tensor& packed) {
    (void)w1, (void)w3;  // inputs only so that autograd routes their gradients
    const torch::Tensor xl = x.scalar_type() == packed.scalar_type() ? x : x.to(packed.scalar_type());
    const torch::Tensor ab = at::linear(xl, packed).contiguous();
    ctx->save_for_backward({xl, packed, ab});
    return kernels::swiglu::silu_mul_packed(ab);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor dab = kernels::swiglu::silu_mul_packed_backward(grads[0], saved[2]);
    torch::autograd::variable_list out = packed_linear_backward(dab, saved[0], saved[1], 2);
    out.push_back(torch::Tensor());  // packed
    return out;
  }
};

// The dtype of `weight`'s working copy under the current autocast (bf16 or fp16), or
// Undefined when none applies (not a CUDA fp32 weight, or autocast off).
at::ScalarType working_copy_dtype(const torch::Tensor& weight) {
  if (!weight.is_cuda() || weight.scalar_type() != at::kFloat ||
      !at::autocast::is_autocast_enabled(c10::DeviceType::CUDA))
    return at::ScalarType::Undefined;
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  return dtype == at::kBFloat16 || dtype == at::kHalf ? dtype : at::ScalarType::Undefined;
}

// Re-casts `copy` when `weight` changed through tensor ops (its version counter moved),
// not through an optimizer that writes the copy in its own pass.
void refresh_copy(const torch::Tensor& weight, torch::Tensor& copy, std::int64_t& version) {
  const auto now = static_cast<std::int64_t>(weight._version());
  if (now == version) return;
  c10::NoGradGuard no_grad;
  copy.copy_(weight.detach());
  version = now;
}

}  // namespace

void truncated_normal_(torch::Tensor& w, double std, at::Generator& gen) {
  constexpr double kClipStd = 3.0;
  c10::NoGradGuard no_grad;
  // Uniform on [2 cdf(-3) - 1, 2 cdf(3) - 1], through erfinv, is N(0,1) restricted to [-3, 3].
  const double lo = 2.0 * standard_normal_cdf(-kClipStd) - 1.0;
  const double hi = 2.0 * standard_normal_cdf(kClipStd) - 1.0;
  w.uniform_(lo, hi, gen);
  w.erfinv_();
  w.mul_(std * std::sqrt(2.0));
  w.clamp_(-kClipStd * std, kClipStd * std);  // erfinv rounding can overshoot by an ulp
}

Linear::Linear(std::int64_t d_in, std::int64_t d_out, const c10::Device& device, at::Generator& gen,
               bool working_copy)
    : working_copy_(working_copy) {
  weight = at::empty({d_out, d_in}, fp32_on(device));
  truncated_normal_(weight, std::sqrt(2.0 / static_cast<double>(d_in + d_out)), gen);
  weight = register_parameter("weight", weight);
}

torch::Tensor Linear::current_copy() const {
  const at::ScalarType dtype = working_copy_ ? working_copy_dtype(weight) : at::ScalarType::Undefined;
  if (dtype == at::ScalarType::Undefined) return {};
  if (!copy_.defined() || copy_.scalar_type() != dtype) {
    copy_ = at::empty_like(weight, weight.options().dtype(dtype));
    runner::register_weight_copy(weight, copy_);
    copy_version_ = -1;
  }
  refresh_copy(weight, copy_, copy_version_);
  return copy_;
}

torch::Tensor Linear::forward(const torch::Tensor& x) const {
  if (const torch::Tensor copy = current_copy(); copy.defined()) return low_precision_linear(x, weight, copy);
  return at::linear(x, weight);
}

Embedding::Embedding(std::int64_t vocab_size, std::int64_t d_model, const c10::Device& device,
                     at::Generator& gen) {
  weight = at::empty({vocab_size, d_model}, fp32_on(device));
  truncated_normal_(weight, 1.0, gen);
  weight = register_parameter("weight", weight);
}

torch::Tensor Embedding::forward(const torch::Tensor& token_ids) const { return at::embedding(weight, token_ids); }

RMSNorm::RMSNorm(std::int64_t d_model, const c10::Device& device, double eps_, bool fused_) : eps(eps_), fused(fused_) {
  weight = register_parameter("weight", at::ones({d_model}, fp32_on(device)));
}

torch::Tensor RMSNorm::forward(const torch::Tensor& x) const {
  if (fused) return kernels::rmsnorm::rms_norm(x, weight, eps);
  const at::ScalarType in_dtype = x.scalar_type();
  // Squares of bf16/fp16 activations lose too much; upcast (fp64 stays fp64).
  const torch::Tensor xf = x.to(at::promote_types(in_dtype, at::kFloat));
  const torch::Tensor inv_rms = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (xf * inv_rms * weight).to(in_dtype);
}

std::tuple<torch::Tensor, torch::Tensor> RMSNorm::forward_add(const torch::Tensor& x, const torch::Tensor& a) const {
  const c10::DeviceType device = x.device().type();
  const bool autocast = at::autocast::is_autocast_enabled(device) && x.scalar_type() == at::kFloat;
  const at::ScalarType matmul_dtype = autocast ? at::autocast::get_autocast_dtype(device) : x.scalar_type();
  if (fused) return kernels::rmsnorm::add_rms_norm(x, a, weight, eps, matmul_dtype);
  const torch::Tensor h = x + a;
  return {h, forward(h).to(matmul_dtype)};
}

RotaryEmbedding::RotaryEmbedding(std::int64_t d_head, std::int64_t context_length, double theta,
                                 const c10::Device& device) {
  // Angles in fp64, rounded once to fp32: positions up to context_length stay exact.
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const torch::Tensor inv_freq = at::pow(theta, -at::arange(0, d_head, 2, f64) / static_cast<double>(d_head));
  const torch::Tensor angles = at::outer(at::arange(context_length, f64), inv_freq);
  cos_ = angles.cos().to(fp32_on(device));
  sin_ = angles.sin().to(fp32_on(device));
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) const {
  const std::int64_t seq_len = x.size(-2);
  TORCH_CHECK(seq_len <= cos_.size(0), "transformer_lm: sequence length ", seq_len, " exceeds context_length ",
              cos_.size(0));
  // Same dtype as x, so q and k stay in the autocast dtype instead of promoting to fp32.
  const torch::Tensor cos = cos_.narrow(0, 0, seq_len).to(x.dtype());
  const torch::Tensor sin = sin_.narrow(0, 0, seq_len).to(x.dtype());
  const torch::Tensor pairs = x.unflatten(-1, {x.size(-1) / 2, 2});
  const torch::Tensor even = pairs.select(-1, 0);
  const torch::Tensor odd = pairs.select(-1, 1);
  return at::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).flatten(-2);
}

CausalSelfAttention::CausalSelfAttention(std::int64_t d_model, std::int64_t num_heads, const RotaryEmbedding* rope,
                                         runner::Attention* attention, const c10::Device& device,
                                         at::Generator& gen, bool fused)
    : num_heads_(num_heads), fused_(fused), rope_(rope), attention_(attention) {
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(d_model, d_model, device, gen, fused));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(d_model, d_model, device, gen, fused));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(d_model, d_model, device, gen, fused));
  output_proj_ = register_module("output_proj", std::make_shared<Linear>(d_model, d_model, device, gen, fused));
}

torch::Tensor PackedWeights::read(const std::vector<torch::Tensor>& weights) {
  const at::ScalarType dtype = working_copy_dtype(weights.front());
  if (dtype == at::ScalarType::Undefined) {
    c10::NoGradGuard no_grad;
    return at::cat(weights);
  }
  const std::int64_t rows = weights.front().size(0);
  if (!copy_.defined() || copy_.scalar_type() != dtype) {
    copy_ = at::empty({rows * static_cast<std::int64_t>(weights.size()), weights.front().size(1)},
                      weights.front().options().dtype(dtype));
    blocks_.clear();
    versions_.assign(weights.size(), -1);
    for (size_t i = 0; i < weights.size(); ++i) {
      blocks_.push_back(copy_.narrow(0, static_cast<std::int64_t>(i) * rows, rows));
      runner::register_weight_copy(weights[i], blocks_.back());
    }
  }
  for (size_t i = 0; i < weights.size(); ++i) refresh_copy(weights[i], blocks_[i], versions_[i]);
  return copy_;
}

torch::Tensor CausalSelfAttention::forward(const torch::Tensor& x) const {
  const std::int64_t batch = x.size(0), seq_len = x.size(1), d_model = x.size(2);
  const std::int64_t d_head = d_model / num_heads_;
  torch::Tensor q, k, v;
  if (fused_) {
    // One projection, RoPE in place, q/k/v as strided [B, T, H, d_head] views of its output;
    // transposed to [B, H, T, d_head] views for the attention plugin (no copy either way).
    const torch::Tensor packed = qkv_.read({q_proj_->weight, k_proj_->weight, v_proj_->weight});
    const auto parts = QkvRope::apply(x, q_proj_->weight, k_proj_->weight, v_proj_->weight, packed,
                                      rope_->cos_table(), rope_->sin_table(), num_heads_);
    q = parts[0].transpose(1, 2);
    k = parts[1].transpose(1, 2);
    v = parts[2].transpose(1, 2);
  } else {
    auto split_heads = [&](const torch::Tensor& t) {  // [B, T, d] -> [B, H, T, d_head]
      return t.view({batch, seq_len, num_heads_, d_head}).transpose(1, 2);
    };
    q = rope_->apply(split_heads(q_proj_->forward(x)));
    k = rope_->apply(split_heads(k_proj_->forward(x)));
    v = split_heads(v_proj_->forward(x));
  }
  const torch::Tensor heads = attention_->forward(q, k, v, runner::AttentionMask::causal());
  return output_proj_->forward(heads.transpose(1, 2).reshape({batch, seq_len, d_model}));
}

SwiGLU::SwiGLU(std::int64_t d_model, std::int64_t d_ff, const c10::Device& device, at::Generator& gen, bool fused)
    : fused_(fused) {
  w1_ = register_module("w1", std::make_shared<Linear>(d_model, d_ff, device, gen, fused));
  w2_ = register_module("w2", std::make_shared<Linear>(d_ff, d_model, device, gen, fused));
  w3_ = register_module("w3", std::make_shared<Linear>(d_model, d_ff, device, gen, fused));
}

torch::Tensor SwiGLU::forward(const torch::Tensor& x) const {
  if (fused_) return w2_->forward(PackedSwiGLU::apply(x, w1_->weight, w3_->weight, w13_.read({w1_->weight, w3_->weight})));
  return w2_->forward(at::silu(w1_->forward(x)) * w3_->forward(x));
}

TransformerBlock::TransformerBlock(std::int64_t d_model, std::int64_t num_heads, std::int64_t d_ff,
                                   const RotaryEmbedding* rope, runner::Attention* attention,
                                   const c10::Device& device, at::Generator& gen, bool fused) {
  // Registration order = Python's attribute order, so parameters() lists alike.
  ln1_ = register_module("ln1", std::make_shared<RMSNorm>(d_model, device, 1e-5, fused));
  attn_ = register_module(
      "attn", std::make_shared<CausalSelfAttention>(d_model, num_heads, rope, attention, device, gen, fused));
  ln2_ = register_module("ln2", std::make_shared<RMSNorm>(d_model, device, 1e-5, fused));
  ffn_ = register_module("ffn", std::make_shared<SwiGLU>(d_model, d_ff, device, gen, fused));
}

std::tuple<torch::Tensor, torch::Tensor> TransformerBlock::forward_fused(const torch::Tensor& x,
                                                                         const torch::Tensor& y,
                                                                         const RMSNorm& next_norm) const {
  torch::Tensor h, y2;
  {
    runner::ScopedRange range("attention");
    std::tie(h, y2) = ln2_->forward_add(x, attn_->forward(y));
  }
  runner::ScopedRange range("feed_forward");
  return next_norm.forward_add(h, ffn_->forward(y2));
}

torch::Tensor TransformerBlock::forward(const torch::Tensor& x) const {
  torch::Tensor h;
  {
    runner::ScopedRange range("attention");
    h = x + attn_->forward(ln1_->forward(x));
  }
  runner::ScopedRange range("feed_forward");
  return h + ffn_->forward(ln2_->forward(h));
}

}  // namespace plugins::transformer_lm
