// Host-side launches of the RMSNorm kernels (rmsnorm.cu). x, y, dy, dx: [rows, dim]
// contiguous in `dtype`; weight, inv_rms, dw_partial: fp32. The fused residual add +
// RMSNorm (add_rmsnorm.cu): x, h, dh_out, dh fp32; a, y, dy, da in `dtype`.
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::rmsnorm {

// Rows of dim up to this use the kernels (the backward keeps one fp32 row of dw in shared memory).
constexpr std::int64_t kMaxDim = 12288;

void launch_forward(const void* x, const float* weight, void* y, float* inv_rms, std::int64_t rows, std::int64_t dim,
                    float eps, DType dtype, cudaStream_t stream);
// dw_partial: [blocks, dim]; the caller sums it over blocks.
void launch_backward(const void* dy, const void* x, const float* weight, const float* inv_rms, void* dx,
                     float* dw_partial, std::int64_t rows, std::int64_t dim, int blocks, DType dtype,
                     cudaStream_t stream);

// h = x + a, y = rms_norm(h) * w: one block per row.
void launch_add_forward(const float* x, const void* a, const float* weight, float* h, void* y, float* inv_rms,
                        std::int64_t rows, std::int64_t dim, float eps, DType dtype, cudaStream_t stream);
// dh = dh_out (may be null: zero) + the norm's input gradient; da = dh in `dtype` unless null.
void launch_add_backward(const void* dy, const float* dh_out, const float* h, const float* weight,
                         const float* inv_rms, float* dh, void* da, float* dw_partial, std::int64_t rows,
                         std::int64_t dim, int blocks, DType dtype, cudaStream_t stream);

}  // namespace kernels::rmsnorm
