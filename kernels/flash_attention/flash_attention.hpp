// FlashAttention-2 as our own CUDA kernels: softmax(scale * q k^T + causal mask) v with
// scale = 1/sqrt(d), top-left causal alignment (query i sees keys j <= i), and the
// row log-sum-exp L that backward recomputes P from. No autograd here: plugins and the
// PyTorch operator wrap these in their own autograd functions.
//
// Inputs: q [..., lq, d], k and v [..., lk, d]; same leading dims, dtype (fp32, bf16,
// fp16) and CUDA device; contiguous; d in {16, 32, 64, 128}. Anything else throws one
// c10::Error naming the problem (check_inputs); nothing is launched.
// fp16/bf16 run on tensor cores (a KernelFamily below picks which kernels); fp32 on CUDA
// cores (flash_fp32.cu) to keep fp32 accuracy.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace kernels::flash {

bool supports_head_dim(std::int64_t d);

// Which tensor-core kernels run bf16/fp16 inputs (fp32 always runs on CUDA cores):
//  * mma_sync: warp-level m16n8k16 MMAs (flash_forward.cu, flash_backward.cu); any
//    CUDA GPU the build targets, every supported head dim.
//  * wgmma: Hopper warpgroup MMAs from swizzled shared memory (flash_*_sm90.cu); sm_90
//    GPUs, d 64 and 128 only; asking for it elsewhere is an error.
//  * automatic: wgmma where it runs (sm_90, bf16/fp16, d 64 or 128), else mma_sync.
enum class KernelFamily { automatic, mma_sync, wgmma };
// Parses "auto", "mma_sync" or "wgmma"; throws c10::Error naming the choices otherwise.
KernelFamily parse_kernel_family(const std::string& name);
const char* to_string(KernelFamily family);
// Empty when the wgmma kernels can run these inputs, else why not (one line).
std::string wgmma_unsupported_reason(const at::Tensor& q);
// The family that runs q: automatic resolved (mma_sync or wgmma), others unchanged.
KernelFamily resolve_kernel_family(KernelFamily family, const at::Tensor& q);
// Throws c10::Error with one line saying what is wrong with the inputs.
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

struct ForwardResult {
  at::Tensor out;  // like q
  at::Tensor lse;  // [..., lq] fp32, natural log
};
ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                      KernelFamily family = KernelFamily::automatic);

struct Gradients {
  at::Tensor dq, dk, dv;
};
// dout need not be contiguous (it is copied if not); out and lse come from forward.
Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, bool causal,
                   KernelFamily family = KernelFamily::automatic);

// FLOPs the kernels are credited with (the usual convention: two matmuls forward,
// 2.5x that backward, halved when causal and lq == lk).
double forward_flops(std::int64_t batch_heads, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal);
inline double backward_flops(std::int64_t bh, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal) {
  return 2.5 * forward_flops(bh, lq, lk, d, causal);
}

}  // namespace kernels::flash
