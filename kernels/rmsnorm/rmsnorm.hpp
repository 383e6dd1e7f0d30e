// Fused RMSNorm over the last dimension, forward and backward, one kernel each:
//   y = x / sqrt(mean(x^2) + eps) * w        (statistics in fp32, y in x's dtype)
// x fp32, bf16 or fp16; w fp32. The forward keeps only inv_rms (4 B per row) for
// the backward, where the tensor-op version keeps an fp32 copy of x and more.
//
// Layout of the kernels (rmsnorm_rows.cuh): a block works on 4 rows at once, its threads
// each owning a few 4-element vectors of the row (16-byte fp32 / 8-byte bf16 accesses), so
// one block reduction serves 4 rows and each thread keeps 4 rows of loads in flight. The
// backward walks tiles of 4 rows grid-stride with as many blocks as fit on the GPU at once,
// each summing its share of dw in shared memory (no atomics, the same bits every run), and
// a second small kernel adds the blocks' fp32 rows of dw ([blocks, dim], at most a few
// hundred rows) into dw.
//
// Bytes per element (rows x dim, element size s): forward reads x and writes y: 2s (x read
// again from L1); backward reads dy, x and writes dx: 3s (dy, x again from L1), plus the
// [blocks, dim] fp32 partial rows of dw written once and read once. FLOP: ~4 per element
// forward, ~10 backward (the row dot, dx, and dw's product and sum).
// Roofline on the H100 (~3.0 TB/s): small (B 4, T 256, d 768, fp32): forward
// 6.3 MB -> 2.1 us, backward 9.4 MB -> 3.1 us per call; these sizes are launch-
// and latency-bound (a few us per call), which is why the step uses a CUDA graph.
// Measured: not timed alone; experiments/step_kernel_diff.yaml shows the step's norm class
// (kernel time and count per step) beside the compiled PyTorch step's.
#pragma once
#include <tuple>

#include <ATen/core/Tensor.h>

namespace kernels::rmsnorm {

// Autograd-capable op: the CUDA kernels for CUDA tensors (dim <= kMaxDim, fp32
// weight), else rms_norm_reference.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The same in tensor ops (autograd by ATen): the reference and the CPU path.
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps);

// The raw kernels, for tests: (y, inv_rms) and (dx, dw).
std::tuple<at::Tensor, at::Tensor> forward_kernel(const at::Tensor& x, const at::Tensor& weight, double eps);
std::tuple<at::Tensor, at::Tensor> backward_kernel(const at::Tensor& dy, const at::Tensor& x,
                                                   const at::Tensor& weight, const at::Tensor& inv_rms);

// Fused residual add + RMSNorm (add_rmsnorm.cu), the pre-norm block's seam:
//   h = x + a                                (the residual stream, in x's dtype, fp32)
//   y = h / sqrt(mean(h^2) + eps) * w        (in `out_dtype`: the dtype the next matmul
//                                             reads, so autocast has nothing left to cast)
// One kernel each way: the forward reads x, a and writes h, y (no add kernel, no cast of
// y); the backward takes y's gradient and h's own (from the next residual add; may be
// undefined) and writes dh = dh_out + the norm's input gradient once in fp32 (x's
// gradient) and once in a's dtype (a's gradient), so no gradient-accumulation add and
// no cast remain. Bytes per element, a and y bf16: forward 4 + 2 read, 4 + 2 written
// (+ x and a re-read from L1) = 12; backward dy 2, dh_out 4, h 4 read, dh 4, da 2 written
// = 16 (+ dw's partial rows, as above); the unfused ops (add, norm, cast) move 30 and 34.
// FLOP ~5 / ~11 per element. Same layout as rms_norm's kernels (above).
// Kernel when x is a CUDA fp32 tensor, a is in out_dtype (fp32, bf16 or fp16), weight
// fp32 and dim <= kMaxDim; else add_rms_norm_reference.
// Measured: not timed alone; experiments/step_kernel_diff.yaml shows the step's norm and
// elementwise classes with it.
std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& weight,
                                                double eps, at::ScalarType out_dtype);

// The same in tensor ops (autograd by ATen): h = x + a; y = rms_norm_reference(h).to(out_dtype).
std::tuple<at::Tensor, at::Tensor> add_rms_norm_reference(const at::Tensor& x, const at::Tensor& a,
                                                          const at::Tensor& weight, double eps,
                                                          at::ScalarType out_dtype);

}  // namespace kernels::rmsnorm
