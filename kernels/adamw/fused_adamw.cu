#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "adamw/adamw_launch.hpp"

namespace kernels::adamw {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

struct Coefficients {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias2_sqrt, eps;
};

__device__ __forceinline__ void update(float& p, float g, float& m, float& v, const Coefficients& c) {
  p = p * c.decay;
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + c.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / c.bias2_sqrt + c.eps;
  p = p - c.step_size * (m / denom);
}

// Four gradients at once: 16 B of fp32 or 8 B of bf16/fp16.
template <typename G> struct alignas(4 * sizeof(G)) Vec4 { G x[4]; };

// C: the copies' type, or NoCopy (none written).
struct NoCopy {};
template <typename C> __device__ __forceinline__ C to_copy(float x);
template <> __device__ __forceinline__ __nv_bfloat16 to_copy<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half to_copy<__half>(float x) { return __float2half(x); }

template <typename G, typename C>
__global__ void __launch_bounds__(kThreads) fused_adamw_kernel(TensorBatch b, Hyperparameters h) {
  constexpr bool kCopy = !std::is_same<C, NoCopy>::value;
  const int chunk = blockIdx.x;
  int t = 0;
  while (chunk >= b.chunk_begin[t + 1]) ++t;
  const long long start = static_cast<long long>(chunk - b.chunk_begin[t]) * kChunkElements;
  const long long n = min(static_cast<long long>(kChunkElements), b.numel[t] - start);

  // Bias corrections in fp64 from the device-side step, once per thread.
  const double step = static_cast<double>(*b.step[t]);
  Coefficients c;
  c.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  c.beta1 = static_cast<float>(h.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  c.step_size = static_cast<float>(h.lr / (1.0 - pow(h.beta1, step)));
  c.bias2_sqrt = static_cast<float>(sqrt(1.0 - pow(h.beta2, step)));
  c.eps = static_cast<float>(h.eps);

  float* p = b.param[t] + start;
  const G* g = static_cast<const G*>(b.grad[t]) + start;
  float* m = b.exp_avg[t] + start;
  float* v = b.exp_avg_sq[t] + start;
  C* out = kCopy ? static_cast<C*>(b.copy[t]) + start : nullptr;

  const bool aligned = ((reinterpret_cast<unsigned long long>(p) | reinterpret_cast<unsigned long long>(m) |
                         reinterpret_cast<unsigned long long>(v)) % 16 == 0) &&
                       reinterpret_cast<unsigned long long>(g) % sizeof(Vec4<G>) == 0 &&
                       (!kCopy || reinterpret_cast<unsigned long long>(out) % (4 * sizeof(C)) == 0);
  long long done = 0;
  if (aligned) {
    const long long n4 = n / 4;
    for (long long i = threadIdx.x; i < n4; i += kThreads) {
      float4 pv = reinterpret_cast<float4*>(p)[i];
      float4 mv = reinterpret_cast<float4*>(m)[i];
      float4 vv = reinterpret_cast<float4*>(v)[i];
      const Vec4<G> gv = reinterpret_cast<const Vec4<G>*>(g)[i];
      update(pv.x, to_float(gv.x[0]), mv.x, vv.x, c);
      update(pv.y, to_float(gv.x[1]), mv.y, vv.y, c);
      update(pv.z, to_float(gv.x[2]), mv.z, vv.z, c);
      update(pv.w, to_float(gv.x[3]), mv.w, vv.w, c);
      reinterpret_cast<float4*>(p)[i] = pv;
      reinterpret_cast<float4*>(m)[i] = mv;
      reinterpret_cast<float4*>(v)[i] = vv;
      if constexpr (kCopy) {
        Vec4<C> cv;
        cv.x[0] = to_copy<C>(pv.x);
        cv.x[1] = to_copy<C>(pv.y);
        cv.x[2] = to_copy<C>(pv.z);
        cv.x[3] = to_copy<C>(pv.w);
        reinterpret_cast<Vec4<C>*>(out)[i] = cv;
      }
    }
    done = n4 * 4;
  }
  for (long long i = done + threadIdx.x; i < n; i += kThreads) {
    float pi = p[i], mi = m[i], vi = v[i];
    update(pi, to_float(g[i]), mi, vi, c);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kCopy) out[i] = to_copy<C>(pi);
  }
}

template <typename G>
void launch_with_grad(const TensorBatch& batch, CopyDType copy_dtype, const Hyperparameters& h, int blocks,
                      cudaStream_t stream) {
  switch (copy_dtype) {
    case CopyDType::None:
      fused_adamw_kernel<G, NoCopy><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
    case CopyDType::BF16:
      fused_adamw_kernel<G, __nv_bfloat16><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
    case CopyDType::F16:
      fused_adamw_kernel<G, __half><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
  }
}

}  // namespace

void launch_fused_adamw(const TensorBatch& batch, DType grad_dtype, CopyDType copy_dtype, const Hyperparameters& h,
                        cudaStream_t stream) {
  const int blocks = batch.chunk_begin[batch.count];
  if (blocks == 0) return;
  switch (grad_dtype) {
    case DType::F32:
      launch_with_grad<float>(batch, copy_dtype, h, blocks, stream);
      break;
    case DType::BF16:
      launch_with_grad<__nv_bfloat16>(batch, copy_dtype, h, blocks, stream);
      break;
    case DType::F16:
      launch_with_grad<__half>(batch, copy_dtype, h, blocks, stream);
      break;
  }
  check_launch("fused_adamw kernel");
}

}  // namespace kernels::adamw
