#include <algorithm>

#include <cuda_runtime.h>

#include "common/device.cuh"
#include "swiglu/swiglu_launch.hpp"

namespace kernels::swiglu {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(long long n) {
  return static_cast<unsigned>(std::min<long long>((n + kThreads - 1) / kThreads, 132LL * 32));
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    const float x = to_float(a[i]);
    out[i] = from_float<T>(x * sigmoid(x) * to_float(b[i]));
  }
}

// d/da silu(a) b = b sig(a) (1 + a (1 - sig(a))),  d/db = silu(a).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ grad, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ da,
                    T* __restrict__ db, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    const float g = to_float(grad[i]), x = to_float(a[i]), y = to_float(b[i]);
    const float s = sigmoid(x);
    da[i] = from_float<T>(g * y * s * (1.0f + x * (1.0f - s)));
    db[i] = from_float<T>(g * x * s);
  }
}

}  // namespace

void launch_forward(const void* a, const void* b, void* out, std::int64_t n, DType dtype, cudaStream_t stream) {
  if (n == 0) return;
#define LAUNCH(T)                                                                                              \
  forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b), \
                                                          static_cast<T*>(out), n)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu forward kernel");
}

void launch_backward(const void* grad, const void* a, const void* b, void* da, void* db, std::int64_t n, DType dtype,
                     cudaStream_t stream) {
  if (n == 0) return;
#define LAUNCH(T)                                                                                           \
  backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(grad), static_cast<const T*>(a), \
                                                           static_cast<const T*>(b), static_cast<T*>(da),    \
                                                           static_cast<T*>(db), n)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu backward kernel");
}

}  // namespace kernels::swiglu
