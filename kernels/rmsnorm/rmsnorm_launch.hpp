// Host-side launches of the RMSNorm kernels (rmsnorm.cu forward, rmsnorm_backward.cu
// backward). x, y, dy, dx: [rows, dim] contiguous in `dtype`; weight, inv_rms, dw: fp32.
// The fused residual add + RMSNorm: x, h, dh_out, dh fp32; a, y, dy, da in `dtype`.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "common/launch.hpp"

namespace kernels::rmsnorm {

// Rows of dim up to this use the kernels (the backward keeps one fp32 row of dw in shared memory).
constexpr std::int64_t kMaxDim = 12288;
// Rows a block of the kernels works on at once (one block reduction for all of them).
constexpr int kRows = 4;

// 4 when every pointer is 16-byte aligned and dim a multiple of 4 (vector accesses), else 1.
inline int vector_width(std::int64_t dim, std::initializer_list<const void*> pointers) {
  if (dim % 4 != 0) return 1;
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return 1;
  return 4;
}

// Threads per block for rows of `vectors` vectors: whole warps, at most 256, each thread
// taking the same number of vectors as far as possible (1600 / 4 = 400 vectors: 224 threads
// of 2, not 256 threads of 1 or 2).
inline int threads_for(std::int64_t vectors) {
  const std::int64_t steps = std::max<std::int64_t>(1, (vectors + 255) / 256);
  return static_cast<int>(std::clamp<std::int64_t>(((vectors + steps - 1) / steps + 31) / 32 * 32, 32, 256));
}

// Blocks of the backward (= rows of its dw workspace, [parts, dim] fp32): as many as fit
// on the GPU's `sms` multiprocessors at once (about 640 threads each at ~90 registers per
// thread), never more than the tiles.
inline int backward_parts(std::int64_t rows, std::int64_t dim, int sms) {
  const std::int64_t tiles = (rows + kRows - 1) / kRows;
  const std::int64_t per_sm = std::max<std::int64_t>(1, 640 / threads_for(dim % 4 == 0 ? dim / 4 : dim));
  return static_cast<int>(std::max<std::int64_t>(1, std::min(tiles, per_sm * sms)));
}

void launch_forward(const void* x, const float* weight, void* y, float* inv_rms, std::int64_t rows, std::int64_t dim,
                    float eps, DType dtype, cudaStream_t stream);
// dw = sum over rows of dy x inv_rms, through `workspace` ([parts, dim] fp32).
void launch_backward(const void* dy, const void* x, const float* weight, const float* inv_rms, void* dx, float* dw,
                     float* workspace, std::int64_t rows, std::int64_t dim, int parts, DType dtype,
                     cudaStream_t stream);

// h = x + a, y = rms_norm(h) * w.
void launch_add_forward(const float* x, const void* a, const float* weight, float* h, void* y, float* inv_rms,
                        std::int64_t rows, std::int64_t dim, float eps, DType dtype, cudaStream_t stream);
// dh = dh_out (may be null: zero) + the norm's input gradient; da = dh in `dtype` unless null.
void launch_add_backward(const void* dy, const float* dh_out, const float* h, const float* weight,
                         const float* inv_rms, float* dh, void* da, float* dw, float* workspace, std::int64_t rows,
                         std::int64_t dim, int parts, DType dtype, cudaStream_t stream);

}  // namespace kernels::rmsnorm
