// The backward's preprocessing in one pass: delta_i = sum_d O_id dO_id in fp32 (the "D" of
// the FlashAttention-2 paper), and, for the fused wgmma backward, a zeroed fp32 dQ buffer.
//
// Reads O and dO once in their own dtype and writes bh*lq floats of delta (plus the
// buffer's bh*lq*d_kernel zeros): at bf16, 16 heads, seq 16384, d 128, 134 MB read and 136 MB
// written, about 0.09 ms at the H100's 3 TB/s. The tensor-op version it replaces
// (two casts to fp32, a product, a sum, then at::zeros) moved about 1 GB.
// O and dO are strided [batch, seq, heads, d] views (flash_launch.hpp, Layout).
// Threads: a power of 2 per row, 8 elements each (16-byte loads for fp16/bf16, two for
// fp32), a shuffle sum over the row's lanes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "common/device.cuh"
#include "dependent_launch.cuh"
#include "flash_launch.hpp"

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

// `lanes` threads per row (a power of 2, 8 columns each, lanes * 8 >= d and zeroed_cols).
template <typename T>
__global__ void backward_delta_kernel(const __grid_constant__ DeltaArgs a, int lanes) {
  dependent_release();  // the backward kernel may launch; it waits for this pass to finish
  const long thread = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (thread == 0 && a.counter != nullptr) *a.counter = 0;
  const long row = thread / lanes, rows = static_cast<long>(a.bh) * a.lq;
  const int col = static_cast<int>(thread % lanes) * 8;
  float sum = 0.f;
  if (row < rows) {
    const long bh = row / a.lq, s = row % a.lq;
    if (col < a.d) {
      Vec8<T> x, y;
      x.load(static_cast<const T*>(a.out) + a.out_at.head_start(bh) + s * a.out_at.row + col);
      y.load(static_cast<const T*>(a.dout) + a.dout_at.head_start(bh) + s * a.dout_at.row + col);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += x.at(i) * y.at(i);
    }
    if (a.zeroed != nullptr && col < a.zeroed_cols) {
      const long long at = a.zeroed_tiled ? dq_tiled_offset(bh, static_cast<int>(s), col, (a.lq + 63) / 64, a.zeroed_cols)
                                          : row * a.zeroed_cols + col;
      float4* z = reinterpret_cast<float4*>(a.zeroed + at);
      z[0] = z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  // Every lane takes part (rows past the end add 0): lanes divides the warp.
  for (int offset = lanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && col == 0) a.delta[row] = sum;
}

template <typename T>
void launch(const DeltaArgs& a, cudaStream_t stream) {
  const int widest = a.zeroed != nullptr && a.zeroed_cols > a.d ? a.zeroed_cols : a.d;
  int lanes = 1;
  while (lanes * 8 < widest) lanes *= 2;
  const long threads = static_cast<long>(a.bh) * a.lq * lanes;
  const int block = 256;
  const long blocks = (threads + block - 1) / block;
  backward_delta_kernel<T><<<static_cast<unsigned>(blocks), block, 0, stream>>>(a, lanes);
}

}  // namespace

void launch_backward_delta(const DeltaArgs& a, cudaStream_t stream) {
  if (a.d < 8 || a.d > 256 || a.d % 8 != 0 || (a.zeroed != nullptr && (a.zeroed_cols > 256 || a.zeroed_cols % 8 != 0)))
    throw std::invalid_argument("flash backward delta: head dim " + std::to_string(a.d) +
                                " is not a multiple of 8 in 8..256");
  switch (a.dtype) {
    case DType::F16: return launch<__half>(a, stream);
    case DType::BF16: return launch<__nv_bfloat16>(a, stream);
    case DType::F32: return launch<float>(a, stream);
  }
}

}  // namespace kernels::flash::detail
