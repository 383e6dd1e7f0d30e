// What the RMSNorm kernels (rmsnorm.cu, rmsnorm_backward.cu) share: a block works on a
// tile of kRows rows at once, its threads splitting the columns into vectors of V
// elements (V = 4 where the row length and the pointers allow 16-byte fp32 / 8-byte
// bf16 accesses, else 1). One block reduction then serves kRows rows, so every thread
// has kRows rows of loads in flight between two barriers instead of one.
#pragma once
#include <cstdint>

#include "common/device.cuh"
#include "rmsnorm/rmsnorm_launch.hpp"

namespace kernels::rmsnorm {

constexpr int kMaxThreads = 256;  // threads per block (threads_for)

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int V, typename T>
__device__ __forceinline__ void load(const T* p, float (&out)[V]) {
  const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_float(pack.v[k]);
}

template <int V, typename T>
__device__ __forceinline__ void store(T* p, const float (&in)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.v[k] = from_float<T>(in[k]);
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}

// Sums each of the kRows values over the block, in place; scratch holds kRows * 32 floats.
__device__ __forceinline__ void block_sum_rows(float (&v)[kRows], float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int s = 0; s < kRows; ++s) v[s] = warp_sum(v[s]);
  __syncthreads();  // scratch may still be read by the previous tile
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kRows; ++s) scratch[s * 32 + warp] = v[s];
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kRows; ++s) v[s] = warp_sum(lane < warps ? scratch[s * 32 + lane] : 0.0f);
}

}  // namespace kernels::rmsnorm
