// The backward's preprocessing in one pass: delta_i = sum_d O_id dO_id in fp32 (the "D" of
// the FlashAttention-2 paper), and, for the fused wgmma backward, a zeroed fp32 dQ buffer.
//
// Reads O and dO once in their own dtype and writes bh*lq floats of delta (plus the
// buffer's bh*lq*d zeros): at bf16, 16 heads, seq 16384, d 128, 134 MB read and 136 MB
// written, about 0.09 ms at the H100's 3 TB/s. The tensor-op version it replaces
// (two casts to fp32, a product, a sum, then at::zeros) moved about 1 GB.
// Threads: d/8 per row, 8 elements each (16-byte loads for fp16/bf16, two for fp32),
// a shuffle sum over the row's lanes (d/8 divides 32).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "../common/device.cuh"
#include "flash_kernels.hpp"

namespace kernels::flash::detail {
namespace {

template <typename T>
struct Vec8 {
  static_assert(sizeof(T) == 2, "16-bit element types");
  uint4 raw;
  __device__ void load(const T* p) { raw = *reinterpret_cast<const uint4*>(p); }
  __device__ float at(int i) const { return to_float(reinterpret_cast<const T*>(&raw)[i]); }
};

template <>
struct Vec8<float> {
  float4 lo, hi;
  __device__ void load(const float* p) {
    lo = reinterpret_cast<const float4*>(p)[0];
    hi = reinterpret_cast<const float4*>(p)[1];
  }
  __device__ float at(int i) const { return i < 4 ? (&lo.x)[i] : (&hi.x)[i - 4]; }
};

template <typename T>
__global__ void backward_delta_kernel(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta,
                                      float* __restrict__ zeroed, long rows, int d) {
  const int per_row = d / 8;
  const long thread = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  const long row = thread / per_row;
  const int col = static_cast<int>(thread % per_row) * 8;
  float sum = 0.f;
  if (row < rows) {
    Vec8<T> a, b;
    a.load(o + row * d + col);
    b.load(dout + row * d + col);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += a.at(i) * b.at(i);
    if (zeroed != nullptr) {
      float4* z = reinterpret_cast<float4*>(zeroed + row * d + col);
      z[0] = z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  // Every lane takes part (rows past the end add 0): per_row divides the warp.
  for (int offset = per_row / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && col == 0) delta[row] = sum;
}

template <typename T>
void launch(const DeltaArgs& a, cudaStream_t stream) {
  const long threads = a.rows * (a.d / 8);
  const int block = 256;
  const long blocks = (threads + block - 1) / block;
  backward_delta_kernel<T><<<static_cast<unsigned>(blocks), block, 0, stream>>>(
      static_cast<const T*>(a.out), static_cast<const T*>(a.dout), a.delta, a.zeroed, a.rows, a.d);
}

}  // namespace

void launch_backward_delta(const DeltaArgs& a, cudaStream_t stream) {
  if (a.d < 8 || a.d > 256 || (a.d & (a.d - 1)) != 0)  // d/8 lanes per row must divide the warp
    throw std::invalid_argument("flash backward delta: head dim " + std::to_string(a.d) + " is not a power of 2 in 8..256");
  switch (a.dtype) {
    case Dtype::fp16: return launch<__half>(a, stream);
    case Dtype::bf16: return launch<__nv_bfloat16>(a, stream);
    case Dtype::fp32: return launch<float>(a, stream);
  }
}

}  // namespace kernels::flash::detail
