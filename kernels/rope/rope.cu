#include <algorithm>

#include <cuda_runtime.h>

#include "common/device.cuh"
#include "rope/rope_launch.hpp"

namespace kernels::rope {
namespace {

constexpr int kThreads = 256;

// One thread per (even, odd) pair; blockIdx.y picks q (0) or k (1).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(const T* __restrict__ q, const T* __restrict__ k, T* __restrict__ q_out, T* __restrict__ k_out,
                const float* __restrict__ cos, const float* __restrict__ sin, long long pairs, long long seq,
                long long heads, int half, float sign) {
  const T* in = blockIdx.y == 0 ? q : k;
  T* out = blockIdx.y == 0 ? q_out : k_out;
  for (long long p = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; p < pairs;
       p += static_cast<long long>(gridDim.x) * kThreads) {
    const int i = static_cast<int>(p % half);
    const long long position = (p / (half * heads)) % seq;
    const float c = cos[position * half + i], s = sign * sin[position * half + i];
    const float even = to_float(in[2 * p]), odd = to_float(in[2 * p + 1]);
    out[2 * p] = from_float<T>(even * c - odd * s);
    out[2 * p + 1] = from_float<T>(even * s + odd * c);
  }
}

}  // namespace

void launch_rope(const void* q, const void* k, void* q_out, void* k_out, const float* cos, const float* sin,
                 std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t d_head, float sign,
                 DType dtype, cudaStream_t stream) {
  const long long pairs = batch * seq * heads * (d_head / 2);
  if (pairs == 0) return;
  const dim3 grid(static_cast<unsigned>(std::min<long long>((pairs + kThreads - 1) / kThreads, 65535LL * 16)), 2);
#define LAUNCH(T)                                                                                          \
  rope_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(q), static_cast<const T*>(k),        \
                                                static_cast<T*>(q_out), static_cast<T*>(k_out), cos, sin, pairs, \
                                                seq, heads, static_cast<int>(d_head / 2), sign)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rope kernel");
}

}  // namespace kernels::rope
