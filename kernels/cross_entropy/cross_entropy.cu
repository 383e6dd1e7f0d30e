#include <cmath>

#include <cuda_runtime.h>

#include "common/device.cuh"
#include "cross_entropy/cross_entropy_launch.hpp"

namespace kernels::cross_entropy {
namespace {

constexpr int kThreads = 512;

// Online log-sum-exp state: running max m and sum s of exp(x - m).
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// One block per row; each logit is read once (online max and sum).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ logits, const long long* __restrict__ targets, float* __restrict__ loss,
                   float* __restrict__ lse, long long classes) {
  __shared__ MaxSum partial[32];
  const long long row = blockIdx.x;
  const T* x = logits + row * classes;
  MaxSum acc{-INFINITY, 0.0f};
  for (long long j = threadIdx.x; j < classes; j += kThreads) {
    const float v = to_float(x[j]);
    if (v > acc.m) {
      acc.s = acc.s * expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += expf(v - acc.m);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, acc.m, offset), __shfl_xor_sync(0xffffffffu, acc.s, offset)};
    acc = merge(acc, other);
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum total = partial[0];
    for (int w = 1; w < kThreads / 32; ++w) total = merge(total, partial[w]);
    const float row_lse = total.m + logf(total.s);
    const long long t = targets[row];
    lse[row] = row_lse;
    loss[row] = (t >= 0 && t < classes) ? row_lse - to_float(x[t]) : NAN;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ logits, const long long* __restrict__ targets,
                    const float* __restrict__ lse, const float* __restrict__ grad_loss, T* __restrict__ grad_logits,
                    long long rows, long long classes) {
  const long long row = blockIdx.x;
  const T* x = logits + row * classes;
  T* dx = grad_logits + row * classes;
  const float scale = *grad_loss / static_cast<float>(rows);
  const float row_lse = lse[row];
  const long long t = targets[row];
  for (long long j = threadIdx.x; j < classes; j += kThreads) {
    const float p = expf(to_float(x[j]) - row_lse);
    dx[j] = from_float<T>((p - (j == t ? 1.0f : 0.0f)) * scale);
  }
}

}  // namespace

void launch_forward(const void* logits, const std::int64_t* targets, float* loss, float* lse, std::int64_t rows,
                    std::int64_t classes, DType dtype, cudaStream_t stream) {
  if (rows == 0) return;
#define LAUNCH(T)                                                                                  \
  forward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(                         \
      static_cast<const T*>(logits), reinterpret_cast<const long long*>(targets), loss, lse, classes)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("cross_entropy forward kernel");
}

void launch_backward(const void* logits, const std::int64_t* targets, const float* lse, const float* grad_loss,
                     void* grad_logits, std::int64_t rows, std::int64_t classes, DType dtype, cudaStream_t stream) {
  if (rows == 0) return;
#define LAUNCH(T)                                                                                              \
  backward_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(                                    \
      static_cast<const T*>(logits), reinterpret_cast<const long long*>(targets), lse, grad_loss,              \
      static_cast<T*>(grad_logits), rows, classes)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("cross_entropy backward kernel");
}

}  // namespace kernels::cross_entropy
