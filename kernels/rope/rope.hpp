// RoPE applied to q and k in one kernel, forward and backward. Layout [batch, seq,
// heads, d_head] (the projection's output before the head transpose), pairs
// (2i, 2i+1) of each head rotated by position * theta^(-2i/d_head):
//   out_2i   = x_2i cos - x_2i+1 sin
//   out_2i+1 = x_2i sin + x_2i+1 cos        (in fp32, stored in x's dtype)
// The backward is the same kernel with the angle negated. Nothing is saved for
// the backward but the (shared) cos/sin tables.
//
// Bytes: reads and writes q and k once (4 x elements x s) plus the tables (L2).
// Roofline on the H100 (~3.0 TB/s): small (4 x 256 x 768 per tensor, fp32):
// 12.6 MB -> 4.2 us; 2.7B (d 2560) bf16: 21 MB -> 7 us.
// Measured: not timed alone yet (the two H100 calls of issue 12 ran the kernel tests and
// the AdamW benchmark); torch_compile_model's "C++ fused + graph" column shows the effect.
#pragma once
#include <tuple>

#include <ATen/core/Tensor.h>

namespace kernels::rope {

// Autograd-capable: q, k [B, T, H, d_head]; cos, sin [>= T, d_head / 2] fp32 on the
// same device. CUDA tensors run the kernel, others rope_reference.
std::tuple<at::Tensor, at::Tensor> rope_qk(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                           const at::Tensor& sin);

// One tensor in tensor ops (fp32 math, result in x's dtype): the reference and CPU path.
at::Tensor rope_reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace kernels::rope
