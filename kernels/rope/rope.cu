#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/device.cuh"
#include "rope/rope_launch.hpp"

namespace kernels::rope {
namespace {

struct Parts {
  PartView part[3];
};

template <typename T, int E>
struct alignas(sizeof(T) * E) Pack {
  T v[E];
};

// One block per (batch, position) row and blockIdx.y per part; each thread moves E
// contiguous elements (E / 2 pairs; 16 bytes when E = 16 / sizeof(T)) of one head at a time.
template <typename T, int E>
__global__ void __launch_bounds__(256)
    rope_kernel(Parts parts, int rotated, const float* __restrict__ cos, const float* __restrict__ sin, int seq,
                int heads, int d_head, float sign) {
  const PartView& p = parts.part[blockIdx.y];
  const long long b = blockIdx.x / seq;
  const int t = blockIdx.x - static_cast<int>(b * seq);
  const T* in = static_cast<const T*>(p.in) + b * p.in_batch + t * p.in_seq;
  T* out = static_cast<T*>(p.out) + b * p.out_batch + t * p.out_seq;
  const int per_head = d_head / E, half = d_head / 2;
  const bool rotate = static_cast<int>(blockIdx.y) < rotated;
  for (int j = threadIdx.x; j < heads * per_head; j += blockDim.x) {
    const int h = j / per_head, c = (j - h * per_head) * E;
    Pack<T, E> x = *reinterpret_cast<const Pack<T, E>*>(in + h * p.in_head + c);
    if (rotate) {
#pragma unroll
      for (int k = 0; k < E / 2; ++k) {
        const float co = cos[t * half + c / 2 + k], si = sign * sin[t * half + c / 2 + k];
        const float even = to_float(x.v[2 * k]), odd = to_float(x.v[2 * k + 1]);
        x.v[2 * k] = from_float<T>(even * co - odd * si);
        x.v[2 * k + 1] = from_float<T>(even * si + odd * co);
      }
    }
    *reinterpret_cast<Pack<T, E>*>(out + h * p.out_head + c) = x;
  }
}

bool vectors_fit(const Parts& parts, int count, std::int64_t d_head, int e, int element) {
  if (d_head % e != 0) return false;
  for (int i = 0; i < count; ++i) {
    const PartView& p = parts.part[i];
    for (std::int64_t stride : {p.in_batch, p.in_seq, p.in_head, p.out_batch, p.out_seq, p.out_head})
      if (stride % e != 0) return false;
    if (reinterpret_cast<std::uintptr_t>(p.in) % (e * element) != 0 ||
        reinterpret_cast<std::uintptr_t>(p.out) % (e * element) != 0)
      return false;
  }
  return true;
}

template <typename T>
void launch_typed(const Parts& parts, int count, int rotated, const float* cos, const float* sin, std::int64_t rows,
                  std::int64_t seq, std::int64_t heads, std::int64_t d_head, float sign, cudaStream_t stream) {
  constexpr int kVector = 16 / sizeof(T);
  const bool vector = vectors_fit(parts, count, d_head, kVector, sizeof(T));
  const std::int64_t per_row = heads * d_head / (vector ? kVector : 2);
  const std::int64_t steps = std::max<std::int64_t>(1, (per_row + 255) / 256);  // per thread, balanced
  const int threads = static_cast<int>(std::clamp<std::int64_t>(((per_row + steps - 1) / steps + 31) / 32 * 32, 32, 256));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(count));
  if (vector)
    rope_kernel<T, kVector><<<grid, threads, 0, stream>>>(parts, rotated, cos, sin, static_cast<int>(seq),
                                                          static_cast<int>(heads), static_cast<int>(d_head), sign);
  else
    rope_kernel<T, 2><<<grid, threads, 0, stream>>>(parts, rotated, cos, sin, static_cast<int>(seq),
                                                    static_cast<int>(heads), static_cast<int>(d_head), sign);
}

}  // namespace

void launch_rope(const PartView* views, int count, int rotated, const float* cos, const float* sin,
                 std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t d_head, float sign,
                 DType dtype, cudaStream_t stream) {
  if (batch * seq == 0 || count == 0) return;
  Parts parts;
  for (int i = 0; i < count; ++i) parts.part[i] = views[i];
#define LAUNCH(T) launch_typed<T>(parts, count, rotated, cos, sin, batch * seq, seq, heads, d_head, sign, stream)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rope kernel");
}

}  // namespace kernels::rope
