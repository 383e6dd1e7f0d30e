#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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

template <typename G>
__global__ void __launch_bounds__(kThreads) fused_adamw_kernel(TensorBatch b, Hyperparameters h) {
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

  const bool aligned = ((reinterpret_cast<unsigned long long>(p) | reinterpret_cast<unsigned long long>(m) |
                         reinterpret_cast<unsigned long long>(v)) % 16 == 0) &&
                       reinterpret_cast<unsigned long long>(g) % sizeof(Vec4<G>) == 0;
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
    }
    done = n4 * 4;
  }
  for (long long i = done + threadIdx.x; i < n; i += kThreads) {
    float pi = p[i], mi = m[i], vi = v[i];
    update(pi, to_float(g[i]), mi, vi, c);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void launch_fused_adamw(const TensorBatch& batch, DType grad_dtype, const Hyperparameters& h, cudaStream_t stream) {
  const int blocks = batch.chunk_begin[batch.count];
  if (blocks == 0) return;
  switch (grad_dtype) {
    case DType::F32:
      fused_adamw_kernel<float><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
    case DType::BF16:
      fused_adamw_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
    case DType::F16:
      fused_adamw_kernel<__half><<<blocks, kThreads, 0, stream>>>(batch, h);
      break;
  }
  check_launch("fused_adamw kernel");
}

}  // namespace kernels::adamw
