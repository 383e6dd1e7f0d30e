// Flash attention for fp32 inputs on CUDA cores, forward and backward.
//
// Same algorithm and outputs as the tensor-core kernels (online softmax, L saved, backward
// recomputes P with delta = rowsum(O * dO)), in exact fp32 arithmetic: tensor cores take
// fp32 only as TF32 (10-bit mantissa), which cannot meet the 2e-3 relative-error bound
// against an fp32 reference with TF32 off. One warp per query row (forward, dQ) or key row
// (dK, dV); each lane holds d/32 elements (d=16: half the lanes idle), a dot product is a
// warp reduction. K, V (or Q, dO) rows stream through L1/L2. FLOPs as in the tensor-core
// kernels. Measured speed and what limits it: README.md, version log.
// Deterministic: every output element is summed by one lane in a fixed order.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "flash_launch.hpp"

namespace kernels::flash::detail {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <int D>
struct Row {
  static constexpr int E = (D + 31) / 32;
  float x[E];
  __device__ void load(const float* p, int lane) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = lane + 32 * e < D ? p[lane + 32 * e] : 0.f;
  }
  __device__ float dot(const float* p, int lane) const {
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (lane + 32 * e < D) s += x[e] * p[lane + 32 * e];
    return warp_sum(s);
  }
  __device__ void zero() {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = 0.f;
  }
  __device__ void axpy(float a, const float* p, int lane) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (lane + 32 * e < D) x[e] += a * p[lane + 32 * e];
  }
  __device__ void store(float* p, float mul, int lane) const {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (lane + 32 * e < D) p[lane + 32 * e] = x[e] * mul;
  }
};

template <int D>
__global__ void __launch_bounds__(kWarps * 32) forward_fp32_kernel(ForwardArgs a) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const long bh = blockIdx.y;
  if (row >= a.lq) return;
  const auto* q = static_cast<const float*>(a.q) + (bh * a.lq + row) * D;
  const auto* k = static_cast<const float*>(a.k) + bh * a.lk * D;
  const auto* v = static_cast<const float*>(a.v) + bh * a.lk * D;
  Row<D> qr, o;
  qr.load(q, lane);
  o.zero();
  float m = -INFINITY, l = 0.f;
  const int key_end = a.causal ? min(a.lk, row + 1) : a.lk;
  for (int j = 0; j < key_end; ++j) {
    const float s = qr.dot(k + static_cast<long>(j) * D, lane) * a.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new), p = expf(s - m_new);
    l = l * alpha + p;
#pragma unroll
    for (int e = 0; e < Row<D>::E; ++e) o.x[e] *= alpha;
    o.axpy(p, v + static_cast<long>(j) * D, lane);
    m = m_new;
  }
  o.store(static_cast<float*>(a.out) + (bh * a.lq + row) * D, l > 0.f ? 1.f / l : 0.f, lane);
  if (lane == 0) a.lse[bh * a.lq + row] = l > 0.f ? m + logf(l) : INFINITY;
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32) backward_dq_fp32_kernel(BackwardArgs a) {
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const long bh = blockIdx.y;
  if (row >= a.lq) return;
  const auto* k = static_cast<const float*>(a.k) + bh * a.lk * D;
  const auto* v = static_cast<const float*>(a.v) + bh * a.lk * D;
  Row<D> qr, dor, dq;
  qr.load(static_cast<const float*>(a.q) + (bh * a.lq + row) * D, lane);
  dor.load(static_cast<const float*>(a.dout) + (bh * a.lq + row) * D, lane);
  dq.zero();
  const float lse = a.lse[bh * a.lq + row], delta = a.delta[bh * a.lq + row];
  const int key_end = a.causal ? min(a.lk, row + 1) : a.lk;
  for (int j = 0; j < key_end; ++j) {
    const float p = expf(qr.dot(k + static_cast<long>(j) * D, lane) * a.scale - lse);
    const float dp = dor.dot(v + static_cast<long>(j) * D, lane);
    dq.axpy(p * (dp - delta), k + static_cast<long>(j) * D, lane);
  }
  dq.store(static_cast<float*>(a.dq) + (bh * a.lq + row) * D, a.scale, lane);
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32) backward_dkdv_fp32_kernel(BackwardArgs a) {
  const int key = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const long bh = blockIdx.y;
  if (key >= a.lk) return;
  const auto* q = static_cast<const float*>(a.q) + bh * a.lq * D;
  const auto* dout = static_cast<const float*>(a.dout) + bh * a.lq * D;
  const float* lse = a.lse + bh * a.lq;
  const float* delta = a.delta + bh * a.lq;
  Row<D> kr, vr, dk, dv;
  kr.load(static_cast<const float*>(a.k) + (bh * a.lk + key) * D, lane);
  vr.load(static_cast<const float*>(a.v) + (bh * a.lk + key) * D, lane);
  dk.zero();
  dv.zero();
  for (int i = a.causal ? key : 0; i < a.lq; ++i) {
    const float* qi = q + static_cast<long>(i) * D;
    const float* doi = dout + static_cast<long>(i) * D;
    const float p = expf(kr.dot(qi, lane) * a.scale - lse[i]);
    dv.axpy(p, doi, lane);
    const float dp = vr.dot(doi, lane);
    dk.axpy(p * (dp - delta[i]), qi, lane);
  }
  dk.store(static_cast<float*>(a.dk) + (bh * a.lk + key) * D, a.scale, lane);
  dv.store(static_cast<float*>(a.dv) + (bh * a.lk + key) * D, 1.f, lane);
}

template <int D>
void launch(const ForwardArgs& a, cudaStream_t stream) {
  forward_fp32_kernel<D><<<dim3((a.lq + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
}

template <int D>
void launch(const BackwardArgs& a, cudaStream_t stream) {
  backward_dkdv_fp32_kernel<D><<<dim3((a.lk + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
  backward_dq_fp32_kernel<D><<<dim3((a.lq + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
}

template <typename Args>
void launch_head_dim(const Args& a, cudaStream_t stream) {
  switch (a.d_kernel) {
    case 16: return launch<16>(a, stream);
    case 32: return launch<32>(a, stream);
    case 64: return launch<64>(a, stream);
    case 128: return launch<128>(a, stream);
    default: throw std::invalid_argument("flash fp32: head dim " + std::to_string(a.d) + " not compiled");
  }
}

}  // namespace

void launch_forward_fp32(const ForwardArgs& a, cudaStream_t stream) { launch_head_dim(a, stream); }
void launch_backward_fp32(const BackwardArgs& a, cudaStream_t stream) { launch_head_dim(a, stream); }

}  // namespace kernels::flash::detail
