#include <cuda_runtime.h>

#include "common/device.cuh"
#include "rmsnorm/rmsnorm_launch.hpp"

namespace kernels::rmsnorm {
namespace {

constexpr int kThreads = 256;

// One block per row: h = x + a (fp32, written once), its sum of squares, then
// y = (h * inv_rms) * w in T. Each thread re-reads only the h it wrote itself.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_forward_kernel(const float* __restrict__ x, const T* __restrict__ a, const float* __restrict__ w,
                       float* __restrict__ h, T* __restrict__ y, float* __restrict__ inv_rms, int dim, float eps) {
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  x += row * dim;
  a += row * dim;
  h += row * dim;
  y += row * dim;
  float squares = 0.0f;
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    const float v = x[j] + to_float(a[j]);
    h[j] = v;
    squares += v * v;
  }
  const float r = rsqrtf(block_sum(squares, scratch) / static_cast<float>(dim) + eps);
  if (threadIdx.x == 0) inv_rms[row] = r;
  for (int j = threadIdx.x; j < dim; j += kThreads) y[j] = from_float<T>(h[j] * r * w[j]);
}

// Grid-stride over rows, as the plain backward: dh = dh_out + r w dy - h r^3 / dim * sum(dy w h),
// written in fp32 (the residual's gradient) and, when da is not null, also in T (the
// gradient of the branch output a); dw accumulates per block in shared memory.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_backward_kernel(const T* __restrict__ dy, const float* __restrict__ dh_out, const float* __restrict__ h,
                        const float* __restrict__ w, const float* __restrict__ inv_rms, float* __restrict__ dh,
                        T* __restrict__ da, float* __restrict__ dw_partial, long long rows, int dim) {
  extern __shared__ float dw[];
  __shared__ float scratch[32];
  for (int j = threadIdx.x; j < dim; j += kThreads) dw[j] = 0.0f;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long at = row * dim;
    const float r = inv_rms[row];
    float dot = 0.0f;
    for (int j = threadIdx.x; j < dim; j += kThreads) dot += to_float(dy[at + j]) * w[j] * h[at + j];
    const float c = block_sum(dot, scratch) * r * r * r / static_cast<float>(dim);
    for (int j = threadIdx.x; j < dim; j += kThreads) {
      const float g = to_float(dy[at + j]), v = h[at + j];
      float grad = r * w[j] * g - v * c;
      if (dh_out != nullptr) grad += dh_out[at + j];
      dh[at + j] = grad;
      if (da != nullptr) da[at + j] = from_float<T>(grad);
      dw[j] += g * v * r;
    }
  }
  for (int j = threadIdx.x; j < dim; j += kThreads) dw_partial[static_cast<long long>(blockIdx.x) * dim + j] = dw[j];
}

}  // namespace

void launch_add_forward(const float* x, const void* a, const float* weight, float* h, void* y, float* inv_rms,
                        std::int64_t rows, std::int64_t dim, float eps, DType dtype, cudaStream_t stream) {
  if (rows == 0) return;
#define LAUNCH(T)                                                                                               \
  add_forward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(                                  \
      x, static_cast<const T*>(a), weight, h, static_cast<T*>(y), inv_rms, static_cast<int>(dim), eps)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("add_rmsnorm forward kernel");
}

void launch_add_backward(const void* dy, const float* dh_out, const float* h, const float* weight,
                         const float* inv_rms, float* dh, void* da, float* dw_partial, std::int64_t rows,
                         std::int64_t dim, int blocks, DType dtype, cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(dim) * sizeof(float);
#define LAUNCH(T)                                                                                        \
  add_backward_kernel<T><<<blocks, kThreads, shared, stream>>>(static_cast<const T*>(dy), dh_out, h, weight, \
                                                               inv_rms, dh, static_cast<T*>(da), dw_partial, \
                                                               rows, static_cast<int>(dim))
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("add_rmsnorm backward kernel");
}

}  // namespace kernels::rmsnorm
