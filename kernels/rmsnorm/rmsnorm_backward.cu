#include <cuda_runtime.h>

#include "rmsnorm/rmsnorm_launch.hpp"
#include "rmsnorm/rmsnorm_rows.cuh"

namespace kernels::rmsnorm {
namespace {

// Grid-stride over tiles of kRows rows. Per row: dx = r w dy - x r^3 / dim * sum(dy w x)
// (+ dx_in, the residual's own gradient, when given), written in TX and, when da is not
// null, also in T. Each thread owns the same columns in every tile, so its share of
// dw = sum over rows of dy x r collects in shared memory without atomics; one fp32 row
// per block goes to `parts`, which sum_parts_kernel adds up.
template <typename TX, typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ dy, const TX* __restrict__ x, const float* __restrict__ w,
                    const float* __restrict__ inv_rms, const float* __restrict__ dx_in, TX* __restrict__ dx,
                    T* __restrict__ da, float* __restrict__ parts, int rows, int dim) {
  extern __shared__ float dw[];
  __shared__ float scratch[kRows * 32];
  const int vectors = dim / V, tiles = (rows + kRows - 1) / kRows;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) dw[j] = 0.0f;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    // Rows past the end repeat the last one (loads stay unconditional, so they issue
    // together); nothing of theirs is written or added to dw.
    const int row0 = tile * kRows, count = min(kRows, rows - row0);
    long long base[kRows];
    float dot[kRows] = {}, r[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
      const int row = row0 + min(s, count - 1);
      base[s] = static_cast<long long>(row) * dim;
      r[s] = inv_rms[row];
    }
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
      float wv[V];
      load<V>(w + i * V, wv);
#pragma unroll
      for (int s = 0; s < kRows; ++s) {
        const long long at = base[s] + i * V;
        float g[V], v[V];
        load<V>(dy + at, g);
        load<V>(x + at, v);
#pragma unroll
        for (int k = 0; k < V; ++k) dot[s] += g[k] * wv[k] * v[k];
      }
    }
    block_sum_rows(dot, scratch);
    float c[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) c[s] = dot[s] * r[s] * r[s] * r[s] / static_cast<float>(dim);
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
      float wv[V], dw_tile[V] = {}, g[kRows][V], v[kRows][V], grad[kRows][V] = {};
      load<V>(w + i * V, wv);
#pragma unroll
      for (int s = 0; s < kRows; ++s) {  // all loads first, then the math and the stores
        load<V>(dy + base[s] + i * V, g[s]);
        load<V>(x + base[s] + i * V, v[s]);
        if (dx_in != nullptr) load<V>(dx_in + base[s] + i * V, grad[s]);
      }
#pragma unroll
      for (int s = 0; s < kRows; ++s) {
#pragma unroll
        for (int k = 0; k < V; ++k) grad[s][k] += r[s] * wv[k] * g[s][k] - v[s][k] * c[s];
        if (s < count) {
#pragma unroll
          for (int k = 0; k < V; ++k) dw_tile[k] += g[s][k] * v[s][k] * r[s];
          store<V>(dx + base[s] + i * V, grad[s]);
          if (da != nullptr) store<V>(da + base[s] + i * V, grad[s]);
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) dw[i * V + k] += dw_tile[k];
    }
  }
  __syncthreads();  // dw[j] below may be another thread's column when blockDim differs per loop
  for (int j = threadIdx.x; j < dim; j += blockDim.x) parts[static_cast<long long>(blockIdx.x) * dim + j] = dw[j];
}

// dw[j] = sum over p of parts[p][j]: 32 columns per block, its 32 rows of threads
// splitting the parts, then a reduction over those rows in shared memory.
__global__ void __launch_bounds__(1024)
    sum_parts_kernel(const float* __restrict__ parts, int count, int dim, float* __restrict__ dw) {
  __shared__ float partial[32][33];
  const int j = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (j < dim)
    for (int p = threadIdx.y; p < count; p += 32) sum += parts[static_cast<long long>(p) * dim + j];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int y = 1; y < 32; ++y) sum += partial[y][threadIdx.x];
    if (j < dim) dw[j] = sum;
  }
}

template <typename TX, typename T>
void launch(const T* dy, const TX* x, const float* w, const float* inv_rms, const float* dx_in, TX* dx, T* da,
            float* dw, float* workspace, std::int64_t rows, std::int64_t dim, int parts, cudaStream_t stream) {
  if (rows == 0) return;
  const int v = vector_width(dim, {dy, x, w, dx_in, dx, da});
  const int threads = threads_for(dim / v);
  const size_t shared = static_cast<size_t>(dim) * sizeof(float);
  auto run = [&](auto kernel) {
    if (shared > 40 * 1024)  // beyond the default 48 KiB with the static scratch
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    kernel<<<parts, threads, shared, stream>>>(dy, x, w, inv_rms, dx_in, dx, da, workspace, static_cast<int>(rows),
                                               static_cast<int>(dim));
  };
  if (v == 4)
    run(backward_kernel<TX, T, 4>);
  else
    run(backward_kernel<TX, T, 1>);
  sum_parts_kernel<<<static_cast<unsigned>((dim + 31) / 32), dim3(32, 32), 0, stream>>>(
      workspace, parts, static_cast<int>(dim), dw);
}

}  // namespace

void launch_backward(const void* dy, const void* x, const float* weight, const float* inv_rms, void* dx, float* dw,
                     float* workspace, std::int64_t rows, std::int64_t dim, int parts, DType dtype,
                     cudaStream_t stream) {
#define LAUNCH(T)                                                                                                 \
  launch<T, T>(static_cast<const T*>(dy), static_cast<const T*>(x), weight, inv_rms, nullptr, static_cast<T*>(dx), \
               static_cast<T*>(nullptr), dw, workspace, rows, dim, parts, stream)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rmsnorm backward kernel");
}

void launch_add_backward(const void* dy, const float* dh_out, const float* h, const float* weight,
                         const float* inv_rms, float* dh, void* da, float* dw, float* workspace, std::int64_t rows,
                         std::int64_t dim, int parts, DType dtype, cudaStream_t stream) {
#define LAUNCH(T)                                                                                                  \
  launch<float, T>(static_cast<const T*>(dy), h, weight, inv_rms, dh_out, dh, static_cast<T*>(da), dw, workspace, \
                   rows, dim, parts, stream)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("add_rmsnorm backward kernel");
}

}  // namespace kernels::rmsnorm
