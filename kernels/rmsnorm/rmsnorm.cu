#include <cuda_runtime.h>

#include "common/device.cuh"
#include "rmsnorm/rmsnorm_launch.hpp"

namespace kernels::rmsnorm {
namespace {

constexpr int kThreads = 256;

// One block per row: sum of squares, then y = (x * inv_rms) * w.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ x, const float* __restrict__ w, T* __restrict__ y,
                   float* __restrict__ inv_rms, int dim, float eps) {
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  x += row * dim;
  y += row * dim;
  float squares = 0.0f;
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    const float v = to_float(x[j]);
    squares += v * v;
  }
  const float r = rsqrtf(block_sum(squares, scratch) / static_cast<float>(dim) + eps);
  if (threadIdx.x == 0) inv_rms[row] = r;
  for (int j = threadIdx.x; j < dim; j += kThreads) y[j] = from_float<T>(to_float(x[j]) * r * w[j]);
}

// Grid-stride over rows. dx = r w dy - x r^3 / dim * sum(dy w x); each thread owns
// the same columns in every row, so its share of dw = sum over rows of dy x r
// accumulates in shared memory without atomics; one fp32 row per block goes out.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ w,
                    const float* __restrict__ inv_rms, T* __restrict__ dx, float* __restrict__ dw_partial,
                    long long rows, int dim) {
  extern __shared__ float dw[];
  __shared__ float scratch[32];
  for (int j = threadIdx.x; j < dim; j += kThreads) dw[j] = 0.0f;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* dy_row = dy + row * dim;
    const T* x_row = x + row * dim;
    T* dx_row = dx + row * dim;
    const float r = inv_rms[row];
    float dot = 0.0f;
    for (int j = threadIdx.x; j < dim; j += kThreads) dot += to_float(dy_row[j]) * w[j] * to_float(x_row[j]);
    const float c = block_sum(dot, scratch) * r * r * r / static_cast<float>(dim);
    for (int j = threadIdx.x; j < dim; j += kThreads) {
      const float g = to_float(dy_row[j]), v = to_float(x_row[j]);
      dx_row[j] = from_float<T>(r * w[j] * g - v * c);
      dw[j] += g * v * r;
    }
  }
  for (int j = threadIdx.x; j < dim; j += kThreads) dw_partial[static_cast<long long>(blockIdx.x) * dim + j] = dw[j];
}

}  // namespace

void launch_forward(const void* x, const float* weight, void* y, float* inv_rms, std::int64_t rows, std::int64_t dim,
                    float eps, DType dtype, cudaStream_t stream) {
  if (rows == 0) return;
#define LAUNCH(T)                                                                                       \
  forward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(                              \
      static_cast<const T*>(x), weight, static_cast<T*>(y), inv_rms, static_cast<int>(dim), eps)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rmsnorm forward kernel");
}

void launch_backward(const void* dy, const void* x, const float* weight, const float* inv_rms, void* dx,
                     float* dw_partial, std::int64_t rows, std::int64_t dim, int blocks, DType dtype,
                     cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(dim) * sizeof(float);
#define LAUNCH(T)                                                                                            \
  do {                                                                                                       \
    backward_kernel<T><<<blocks, kThreads, shared, stream>>>(static_cast<const T*>(dy), static_cast<const T*>(x), \
                                                             weight, inv_rms, static_cast<T*>(dx), dw_partial, \
                                                             rows, static_cast<int>(dim));                   \
  } while (0)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("rmsnorm backward kernel");
}

}  // namespace kernels::rmsnorm
