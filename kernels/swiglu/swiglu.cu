#include <algorithm>
#include <cstdint>
#include <initializer_list>

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

template <typename T, int E>
struct alignas(sizeof(T) * E) Pack {
  T v[E];
};

// Grid-stride over packs of E elements (16 bytes when E = 16 / sizeof(T), else 1).
template <typename T, int E>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long packs) {
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < packs;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    const Pack<T, E> x = reinterpret_cast<const Pack<T, E>*>(a)[i], y = reinterpret_cast<const Pack<T, E>*>(b)[i];
    Pack<T, E> o;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float xf = to_float(x.v[k]);
      o.v[k] = from_float<T>(xf * sigmoid(xf) * to_float(y.v[k]));
    }
    reinterpret_cast<Pack<T, E>*>(out)[i] = o;
  }
}

// d/da silu(a) b = b sig(a) (1 + a (1 - sig(a))),  d/db = silu(a).
template <typename T, int E>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ grad, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ da,
                    T* __restrict__ db, long long packs) {
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < packs;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    const Pack<T, E> g = reinterpret_cast<const Pack<T, E>*>(grad)[i], x = reinterpret_cast<const Pack<T, E>*>(a)[i],
                     y = reinterpret_cast<const Pack<T, E>*>(b)[i];
    Pack<T, E> dx, dy;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float gf = to_float(g.v[k]), xf = to_float(x.v[k]), yf = to_float(y.v[k]);
      const float s = sigmoid(xf);
      dx.v[k] = from_float<T>(gf * yf * s * (1.0f + xf * (1.0f - s)));
      dy.v[k] = from_float<T>(gf * xf * s);
    }
    reinterpret_cast<Pack<T, E>*>(da)[i] = dx;
    reinterpret_cast<Pack<T, E>*>(db)[i] = dy;
  }
}

// 16-byte packs when n and every pointer allow them.
template <typename T>
bool packs_fit(std::int64_t n, std::initializer_list<const void*> pointers) {
  if (n % (16 / sizeof(T)) != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace

void launch_forward(const void* a, const void* b, void* out, std::int64_t n, DType dtype, cudaStream_t stream) {
  if (n == 0) return;
#define LAUNCH(T)                                                                                     \
  do {                                                                                                \
    constexpr int kPack = 16 / sizeof(T);                                                             \
    const auto *pa = static_cast<const T*>(a), *pb = static_cast<const T*>(b);                        \
    auto* po = static_cast<T*>(out);                                                                  \
    if (packs_fit<T>(n, {a, b, out}))                                                                 \
      forward_kernel<T, kPack><<<grid_for(n / kPack), kThreads, 0, stream>>>(pa, pb, po, n / kPack); \
    else                                                                                              \
      forward_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(pa, pb, po, n);                     \
  } while (0)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu forward kernel");
}

void launch_backward(const void* grad, const void* a, const void* b, void* da, void* db, std::int64_t n, DType dtype,
                     cudaStream_t stream) {
  if (n == 0) return;
#define LAUNCH(T)                                                                                              \
  do {                                                                                                         \
    constexpr int kPack = 16 / sizeof(T);                                                                      \
    const auto *pg = static_cast<const T*>(grad), *pa = static_cast<const T*>(a), *pb = static_cast<const T*>(b); \
    auto *pda = static_cast<T*>(da), *pdb = static_cast<T*>(db);                                               \
    if (packs_fit<T>(n, {grad, a, b, da, db}))                                                                 \
      backward_kernel<T, kPack><<<grid_for(n / kPack), kThreads, 0, stream>>>(pg, pa, pb, pda, pdb, n / kPack); \
    else                                                                                                       \
      backward_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(pg, pa, pb, pda, pdb, n);                   \
  } while (0)
  KERNELS_DISPATCH_DTYPE(dtype, LAUNCH)
#undef LAUNCH
  check_launch("swiglu backward kernel");
}

}  // namespace kernels::swiglu
