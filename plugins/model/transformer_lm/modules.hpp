// Building blocks of the transformer LM as torch::nn::Modules whose parameter
// names match the Python reference's state dict ("layers.0.attn.q_proj.weight").
// Every tensor op is an ATen op, so autocast and autograd apply as in PyTorch.
#pragma once
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include "runner/attention.hpp"

namespace plugins::transformer_lm {

// Fills `w` from N(0, std^2) truncated to [-3 std, 3 std] (inverse-CDF sampling).
void truncated_normal_(torch::Tensor& w, double std, at::Generator& gen);

// y = x W^T, W [d_out, d_in], init std sqrt(2 / (d_in + d_out)).
// working_copy: under bf16/fp16 autocast on CUDA the forward reads a low-precision copy
// of W kept between steps (registered in runner/weight_copies.hpp, so AdamW impl: fused
// rewrites it in its pass) instead of casting W at every call; re-cast only when W changed
// through tensor ops (its version counter moved). The backward computes dx from the copy
// and dW straight into fp32 (a bf16 GEMM with fp32 output), so no cast kernel remains.
class Linear : public torch::nn::Module {
 public:
  Linear(std::int64_t d_in, std::int64_t d_out, const c10::Device& device, at::Generator& gen,
         bool working_copy = false);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight;

 private:
  // The copy in autocast's dtype, made or refreshed here; undefined when none applies.
  torch::Tensor current_copy() const;
  bool working_copy_;
  mutable torch::Tensor copy_;
  mutable std::int64_t copy_version_ = -1;
};

// Lookup table [vocab_size, d_model], init std 1.
class Embedding : public torch::nn::Module {
 public:
  Embedding(std::int64_t vocab_size, std::int64_t d_model, const c10::Device& device, at::Generator& gen);
  torch::Tensor forward(const torch::Tensor& token_ids) const;
  torch::Tensor weight;
};

// x / sqrt(mean(x^2) + eps) * gain, computed in (at least) fp32, returned in x's dtype.
// fused: one kernel each way (kernels/rmsnorm) instead of tensor ops.
class RMSNorm : public torch::nn::Module {
 public:
  RMSNorm(std::int64_t d_model, const c10::Device& device, double eps = 1e-5, bool fused = false);
  torch::Tensor forward(const torch::Tensor& x) const;
  // (h, y): h = x + a (the residual add before this norm), y = forward(h) in the dtype
  // the next matmul computes in (autocast's, if on). fused: one kernel each way
  // (kernels/rmsnorm add_rms_norm); else tensor ops.
  std::tuple<torch::Tensor, torch::Tensor> forward_add(const torch::Tensor& x, const torch::Tensor& a) const;
  torch::Tensor weight;
  double eps;
  bool fused;
};

// Rotary position embedding: rotates the pairs (2i, 2i+1) of each head's vector at
// position p by angle p * theta^(-2i/d_head). cos/sin tables are plain members,
// not buffers: they are not state (as Python's persistent=False), so they stay out
// of named_buffers(), state dicts and DDP broadcasts.
class RotaryEmbedding {
 public:
  RotaryEmbedding(std::int64_t d_head, std::int64_t context_length, double theta, const c10::Device& device);
  // x [..., T, d_head] with positions 0..T-1 on dimension -2.
  torch::Tensor apply(const torch::Tensor& x) const;
  const torch::Tensor& cos_table() const { return cos_; }
  const torch::Tensor& sin_table() const { return sin_; }

 private:
  torch::Tensor cos_, sin_;  // [context_length, d_head / 2], fp32
};

// The weights one fused matmul reads as consecutive row blocks of one [sum of rows, d_in]
// tensor: under bf16/fp16 autocast on CUDA a packed working copy whose blocks are the
// weights' registered copies (runner/weight_copies.hpp: AdamW impl fused rewrites them in
// its pass), re-cast block by block when a weight changed through tensor ops; otherwise
// the weights concatenated outside autograd (their gradients come back as blocks).
class PackedWeights {
 public:
  torch::Tensor read(const std::vector<torch::Tensor>& weights);

 private:
  torch::Tensor copy_;
  std::vector<torch::Tensor> blocks_;
  std::vector<std::int64_t> versions_;
};

// fused: q, k, v from one matmul into one [B, T, 3 d] buffer (under autocast, of the
// packed working copy [3 d, d] whose three row blocks are wq's, wk's and wv's registered
// copies), RoPE in place on its q and k parts (kernels/rope rope_qkv_), q, k, v handed to
// attention as strided views; the backward's one kernel (rope_qkv_backward) writes dqkv,
// then one matmul each gives dx and [dWq; dWk; dWv]. Parameters stay q_proj/k_proj/v_proj.
class CausalSelfAttention : public torch::nn::Module {
 public:
  CausalSelfAttention(std::int64_t d_model, std::int64_t num_heads, const RotaryEmbedding* rope,
                      runner::Attention* attention, const c10::Device& device, at::Generator& gen,
                      bool fused = false);
  torch::Tensor forward(const torch::Tensor& x) const;  // [B, T, d_model]

 private:
  std::int64_t num_heads_;
  bool fused_;
  const RotaryEmbedding* rope_;
  runner::Attention* attention_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, output_proj_;
  mutable PackedWeights qkv_;
};

// w2(silu(w1 x) * w3 x); fused: w1 x and w3 x from one matmul into one [B, T, 2 d_ff]
// buffer (PackedWeights), silu(.) * . over its two halves in one kernel (kernels/swiglu
// silu_mul_packed) whose backward writes both halves' gradients into one buffer, so one
// matmul each gives dx (no gradient add) and [dW1; dW3].
class SwiGLU : public torch::nn::Module {
 public:
  SwiGLU(std::int64_t d_model, std::int64_t d_ff, const c10::Device& device, at::Generator& gen, bool fused = false);
  torch::Tensor forward(const torch::Tensor& x) const;

 private:
  bool fused_;
  std::shared_ptr<Linear> w1_, w2_, w3_;
  mutable PackedWeights w13_;
};

// Pre-norm block: x + attn(ln1(x)), then x + ffn(ln2(x)).
class TransformerBlock : public torch::nn::Module {
 public:
  TransformerBlock(std::int64_t d_model, std::int64_t num_heads, std::int64_t d_ff, const RotaryEmbedding* rope,
                   runner::Attention* attention, const c10::Device& device, at::Generator& gen, bool fused = false);
  torch::Tensor forward(const torch::Tensor& x) const;
  // The same block with every residual add fused into the norm after it: takes x and
  // y = ln1(x), returns (x_out, next_norm(x_out)). ln2 fuses the attention residual;
  // next_norm (the next block's ln1, or the final norm) fuses the feed-forward one.
  std::tuple<torch::Tensor, torch::Tensor> forward_fused(const torch::Tensor& x, const torch::Tensor& y,
                                                         const RMSNorm& next_norm) const;
  const RMSNorm& ln1() const { return *ln1_; }

 private:
  std::shared_ptr<RMSNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<SwiGLU> ffn_;
};

}  // namespace plugins::transformer_lm
