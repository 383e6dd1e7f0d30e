// FlashAttention-2 as our own CUDA kernels: softmax(scale * q k^T + causal mask) v with
// scale = 1/sqrt(d), top-left causal alignment (query i sees keys j <= i), and the
// row log-sum-exp L that backward recomputes P from. No autograd here: plugins and the
// PyTorch operator wrap these in their own autograd functions.
//
// Inputs: q [..., lq, d], k and v [..., lk, d]; same leading dims, dtype (fp32, bf16,
// fp16) and CUDA device; contiguous; d in {16, 32, 64, 128}. Anything else throws one
// c10::Error naming the problem (check_inputs); nothing is launched.
// fp16/bf16 run on tensor cores (flash_forward.cu, flash_backward.cu); fp32 on CUDA cores
// (flash_fp32.cu) to keep fp32 accuracy.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace kernels::flash {

bool supports_head_dim(std::int64_t d);
// Throws c10::Error with one line saying what is wrong with the inputs.
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

struct ForwardResult {
  at::Tensor out;  // like q
  at::Tensor lse;  // [..., lq] fp32, natural log
};
ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

struct Gradients {
  at::Tensor dq, dk, dv;
};
// dout need not be contiguous (it is copied if not); out and lse come from forward.
Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, bool causal);

// FLOPs the kernels are credited with (the usual convention: two matmuls forward,
// 2.5x that backward, halved when causal and lq == lk).
double forward_flops(std::int64_t batch_heads, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal);
inline double backward_flops(std::int64_t bh, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal) {
  return 2.5 * forward_flops(bh, lq, lk, d, causal);
}

}  // namespace kernels::flash
