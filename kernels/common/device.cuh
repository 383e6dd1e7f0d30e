// Device helpers the kernels of kernels/ share: conversions for the three
// activation dtypes and a block-wide sum.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kernels {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024), returned
// to every thread. `scratch` holds 32 floats; safe to call repeatedly.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

}  // namespace kernels

// Instantiates LAUNCH(T) for the dtype tag `dtype` (kernels::DType).
#define KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)        \
  switch (dtype) {                                   \
    case ::kernels::DType::F32: LAUNCH(float); break; \
    case ::kernels::DType::BF16: LAUNCH(__nv_bfloat16); break; \
    case ::kernels::DType::F16: LAUNCH(__half); break; \
  }
