// SwiGLU activation, forward and backward, one elementwise kernel each:
//   out = silu(a) * b = a * sigmoid(a) * b                 (fp32 math, out in a's dtype)
//   da = g * b * s * (1 + a (1 - s)),  db = g * silu(a)    (s = sigmoid(a))
// Saves a and b (which the matmuls before it produce anyway); the tensor-op version
// also keeps silu(a) and allocates it and its gradient as separate tensors.
//
// Each thread moves 16-byte packs (8 bf16 / 4 fp32 elements) where the element count and
// the pointers allow, else single elements. Bytes per element (size s): forward 3s, backward 5s. Roofline on the H100
// (~3.0 TB/s): small (4 x 256 x 3072, fp32): forward 37.7 MB -> 12.6 us, backward
// 63 MB -> 21 us; 2.7B bf16 (4 x 256 x 10240): forward 63 MB -> 21 us, backward
// 105 MB -> 35 us.
// Measured: not timed alone yet (the two H100 calls of issue 12 ran the kernel tests and
// the AdamW benchmark); torch_compile_model's "C++ fused + graph" column shows the effect.
#pragma once
#include <ATen/core/Tensor.h>

namespace kernels::swiglu {

// Autograd-capable: a and b of one shape and dtype; CUDA runs the kernels, else the reference.
at::Tensor silu_mul(const at::Tensor& a, const at::Tensor& b);

// The fused w1 | w3 projection's form, not autograd-aware (the caller's autograd function
// owns it; see plugins/model/transformer_lm): ab [..., 2 cols] contiguous holds a | b per
// row; silu_mul_packed returns silu(a) * b [..., cols], silu_mul_packed_backward the
// gradient [..., 2 cols] (da | db per row) for the output's gradient, written by one kernel.
at::Tensor silu_mul_packed(const at::Tensor& ab);
at::Tensor silu_mul_packed_backward(const at::Tensor& grad, const at::Tensor& ab);

// at::silu(a) * b in tensor ops: the reference and the CPU path.
at::Tensor silu_mul_reference(const at::Tensor& a, const at::Tensor& b);

}  // namespace kernels::swiglu
