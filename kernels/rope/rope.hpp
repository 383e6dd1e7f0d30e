// RoPE applied to q and k in one kernel, forward and backward. Layout [batch, seq,
// heads, d_head] (the projection's output before the head transpose), pairs
// (2i, 2i+1) of each head rotated by position * theta^(-2i/d_head):
//   out_2i   = x_2i cos - x_2i+1 sin
//   out_2i+1 = x_2i sin + x_2i+1 cos        (in fp32, stored in x's dtype)
// The backward is the same kernel with the angle negated. Nothing is saved for
// the backward but the (shared) cos/sin tables.
//
// One kernel for all entry points: a block per (batch, position) row and part (q, k, v),
// each thread moving 16 bytes (8 bf16 / 4 fp32 elements) of a head per step through
// strided views, with 32-bit index math. Bytes: reads and writes q and k once
// (4 x elements x s; the qkv backward also reads and writes dv: 6 x) plus the tables (L2);
// ~6 FLOP per pair. Roofline on the H100 (~3.0 TB/s): small (4 x 256 x 768 per tensor,
// fp32): 12.6 MB -> 4.2 us; 2.7B (d 2560) bf16: 21 MB -> 7 us.
// Measured: not timed alone; experiments/step_kernel_diff.yaml shows it in the step's
// elementwise class (kernel time and count per step).
#pragma once
#include <cstdint>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace kernels::rope {

// Autograd-capable: q, k [B, T, H, d_head]; cos, sin [>= T, d_head / 2] fp32 on the
// same device. CUDA tensors run the kernel, others rope_reference.
std::tuple<at::Tensor, at::Tensor> rope_qk(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                           const at::Tensor& sin);

// The fused QKV projection's RoPE: qkv [batch, seq, 3 * heads * d_head] contiguous (q | k | v
// along the last dimension, each [heads, d_head]): rotates its q and k parts in place, v
// untouched. Not autograd-aware: the caller's autograd function owns qkv (see
// plugins/model/transformer_lm, where q, k, v then go to attention as strided views).
void rope_qkv_(const at::Tensor& qkv, std::int64_t heads, const at::Tensor& cos, const at::Tensor& sin);

// Its gradient together with the split's: dq, dk, dv [batch, seq, heads, d_head] (any strides
// with d_head contiguous) -> dqkv [batch, seq, 3 * heads * d_head] = (rope^-1(dq), rope^-1(dk),
// dv), one kernel on CUDA (reads each gradient once, writes dqkv once).
at::Tensor rope_qkv_backward(const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& cos,
                             const at::Tensor& sin);

// One tensor in tensor ops (fp32 math, result in x's dtype): the reference and CPU path.
at::Tensor rope_reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace kernels::rope
