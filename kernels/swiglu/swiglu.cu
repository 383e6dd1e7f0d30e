#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include <cuda_runtime.h>

#include "common/device.cuh"
#include "swiglu/swiglu_launch.hpp"

namespace kernels::swiglu {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename T, int E>
struct alignas(sizeof(T) * E) Pack {
  T v[E];
};

template <int E, typename T>
__device__ __forceinline__ Pack<T, E> load(const T* p) {
  return *reinterpret_cast<const Pack<T, E>*>(p);
}

template <int E, typename T>
__device__ __forceinline__ void store(T* p, const Pack<T, E>& v) {
  *reinterpret_cast<Pack<T, E>*>(p) = v;
}

// [rows, cols] with row strides (elements): blockIdx.x and the threads cover a row's packs
// of E elements (16 bytes when E = 16 / sizeof(T)), blockIdx.y walks the rows.
template <typename T, int E>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int rows, int cols,
                   long long in_stride, long long out_stride) {
  const int c = (blockIdx.x * kThreads + threadIdx.x) * E;
  if (c >= cols) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const Pack<T, E> x = load<E>(a + r * in_stride + c), y = load<E>(b + r * in_stride + c);
    Pack<T, E> o;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float xf = to_float(x.v[k]);
      o.v[k] = from_float<T>(xf * sigmoid(xf) * to_float(y.v[k]));
    }
    store<E>(out + r * out_stride + c, o);
  }
}

// d/da silu(a) b = b sig(a) (1 + a (1 - sig(a))),  d/db = silu(a).
template <typename T, int E>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ grad, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ da,
                    T* __restrict__ db, int rows, int cols, long long grad_stride, long long in_stride,
                    long long out_stride) {
  const int c = (blockIdx.x * kThreads + threadIdx.x) * E;
  if (c >= cols) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const Pack<T, E> g = load<E>(grad + r * grad_stride + c), x = load<E>(a + r * in_stride + c),
                     y = load<E>(b + r * in_stride + c);
    Pack<T, E> dx, dy;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float gf = to_float(g.v[k]), xf = to_float(x.v[k]), yf = to_float(y.v[k]);
      const float s = sigmoid(xf);
      dx.v[k] = from_float<T>(gf * yf * s * (1.0f + xf * (1.0f - s)));
      dy.v[k] = from_float<T>(gf * xf * s);
    }
    store<E>(da + r * out_stride + c, dx);
    store<E>(db + r * out_stride + c, dy);
  }
}

// 16-byte packs when the row length, the strides and every pointer allow them.
template <typename T>
bool packs_fit(std::int64_t cols, std::initializer_list<std::int64_t> strides,
               std::initializer_list<const void*> pointers) {
  constexpr std::int64_t kPack = 16 / sizeof(T);
  if (cols % kPack != 0) return false;
  for (std::int64_t s : strides)
    if (s % kPack != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

dim3 grid_for(std::int64_t rows, std::int64_t cols, int e) {
  const std::int64_t packs = (cols + e - 1) / e;
  return dim3(static_cast<unsigned>((packs + kThreads - 1) / kThreads),
              static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
}

}  // namespace

void launch_forward(const void* a, const void* b, void* out, std::int64_t rows, std::int64_t cols,
                    std::int64_t in_stride, std::int64_t out_stride, DType dtype, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
#define LAUNCH(T)                                                                                            \
  do {                                                                                                       \
    constexpr int kPack = 16 / sizeof(T);                                                                    \
    const auto *pa = static_cast<const T*>(a), *pb = static_cast<const T*>(b);                               \
    auto* po = static_cast<T*>(out);                                                                         \
    const int r = static_cast<int>(rows), c = static_cast<int>(cols);                                        \
    if (packs_fit<T>(cols, {in_stride, out_stride}, {a, b, out}))                                            \
      forward_kernel<T, kPack><<<grid_for(rows, cols, kPack), kThreads, 0, stream>>>(pa, pb, po, r, c, in_stride, \
                                                                                     out_stride);            \
    else                                                                                                     \
      forward_kernel<T, 1><<<grid_for(rows, cols, 1), kThreads, 0, stream>>>(pa, pb, po, r, c, in_stride,    \
                                                                             out_stride);                    \
  } while (0)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu forward kernel");
}

void launch_backward(const void* grad, const void* a, const void* b, void* da, void* db, std::int64_t rows,
                     std::int64_t cols, std::int64_t grad_stride, std::int64_t in_stride, std::int64_t out_stride,
                     DType dtype, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
#define LAUNCH(T)                                                                                                \
  do {                                                                                                           \
    constexpr int kPack = 16 / sizeof(T);                                                                        \
    const auto *pg = static_cast<const T*>(grad), *pa = static_cast<const T*>(a), *pb = static_cast<const T*>(b); \
    auto *pda = static_cast<T*>(da), *pdb = static_cast<T*>(db);                                                 \
    const int r = static_cast<int>(rows), c = static_cast<int>(cols);                                            \
    if (packs_fit<T>(cols, {grad_stride, in_stride, out_stride}, {grad, a, b, da, db}))                          \
      backward_kernel<T, kPack><<<grid_for(rows, cols, kPack), kThreads, 0, stream>>>(                           \
          pg, pa, pb, pda, pdb, r, c, grad_stride, in_stride, out_stride);                                       \
    else                                                                                                         \
      backward_kernel<T, 1><<<grid_for(rows, cols, 1), kThreads, 0, stream>>>(pg, pa, pb, pda, pdb, r, c,        \
                                                                              grad_stride, in_stride, out_stride); \
  } while (0)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu backward kernel");
}

}  // namespace kernels::swiglu
