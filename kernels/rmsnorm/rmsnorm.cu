#include <cuda_runtime.h>

#include "rmsnorm/rmsnorm_launch.hpp"
#include "rmsnorm/rmsnorm_rows.cuh"

namespace kernels::rmsnorm {
namespace {

// One tile of kRows rows per block: h = x (+ a), its sum of squares, then
// y = (h * inv_rms) * w in T. With a, h (fp32) is written once; the second pass
// recomputes x + a from L1 rather than reading h back. TX is x's dtype (T without a, fp32 with).
template <typename TX, typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const TX* __restrict__ x, const T* __restrict__ a, const float* __restrict__ w,
                   float* __restrict__ h, T* __restrict__ y, float* __restrict__ inv_rms, int rows, int dim,
                   float eps) {
  __shared__ float scratch[kRows * 32];
  // Rows past the end repeat the last one (loads stay unconditional); only real rows are written.
  const int row0 = blockIdx.x * kRows, vectors = dim / V, count = min(kRows, rows - row0);
  long long base[kRows];
#pragma unroll
  for (int s = 0; s < kRows; ++s) base[s] = static_cast<long long>(row0 + min(s, count - 1)) * dim;
  auto value = [&](long long at, float (&v)[V]) {
    load<V>(x + at, v);
    if (a != nullptr) {
      float b[V];
      load<V>(a + at, b);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] += b[k];
    }
  };
  float squares[kRows] = {};
  for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
      const long long at = base[s] + i * V;
      float v[V];
      value(at, v);
      if (h != nullptr && s < count) store<V>(h + at, v);
#pragma unroll
      for (int k = 0; k < V; ++k) squares[s] += v[k] * v[k];
    }
  }
  block_sum_rows(squares, scratch);
  float r[kRows];
#pragma unroll
  for (int s = 0; s < kRows; ++s) {
    r[s] = rsqrtf(squares[s] / static_cast<float>(dim) + eps);
    if (threadIdx.x == 0 && s < count) inv_rms[row0 + s] = r[s];
  }
  for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
    float wv[V];
    load<V>(w + i * V, wv);
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
      const long long at = base[s] + i * V;
      float v[V];
      value(at, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = v[k] * r[s] * wv[k];
      if (s < count) store<V>(y + at, v);
    }
  }
}

template <typename TX, typename T>
void launch(const TX* x, const T* a, const float* w, float* h, T* y, float* inv_rms, std::int64_t rows,
            std::int64_t dim, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  const int v = vector_width(dim, {x, a, w, h, y});
  const unsigned blocks = static_cast<unsigned>((rows + kRows - 1) / kRows);
  const int threads = threads_for(dim / v);
  if (v == 4)
    forward_kernel<TX, T, 4><<<blocks, threads, 0, stream>>>(x, a, w, h, y, inv_rms, static_cast<int>(rows),
                                                             static_cast<int>(dim), eps);
  else
    forward_kernel<TX, T, 1><<<blocks, threads, 0, stream>>>(x, a, w, h, y, inv_rms, static_cast<int>(rows),
                                                             static_cast<int>(dim), eps);
}

}  // namespace

void launch_forward(const void* x, const float* weight, void* y, float* inv_rms, std::int64_t rows, std::int64_t dim,
                    float eps, DType dtype, cudaStream_t stream) {
#define LAUNCH(T) \
  launch<T, T>(static_cast<const T*>(x), nullptr, weight, nullptr, static_cast<T*>(y), inv_rms, rows, dim, eps, stream)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rmsnorm forward kernel");
}

void launch_add_forward(const float* x, const void* a, const float* weight, float* h, void* y, float* inv_rms,
                        std::int64_t rows, std::int64_t dim, float eps, DType dtype, cudaStream_t stream) {
#define LAUNCH(T) \
  launch<float, T>(x, static_cast<const T*>(a), weight, h, static_cast<T*>(y), inv_rms, rows, dim, eps, stream)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("add_rmsnorm forward kernel");
}

}  // namespace kernels::rmsnorm
