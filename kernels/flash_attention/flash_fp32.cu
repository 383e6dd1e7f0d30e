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
// Masks (mask.hpp): a row's loop runs over the keys it sees, a key's over the queries that see
// it (key_tiles / query_tiles with one-row tiles), so no score is masked inside; kWindow builds
// the sliding-window kernels.
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

template <int D, bool kWindow>
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
  const TileRange keys = a.mask.key_tiles<kWindow>(row, 1, 1);
  for (int j = keys.begin; j < keys.end; ++j) {
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

template <int D, bool kWindow>
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
  const TileRange keys = a.mask.key_tiles<kWindow>(row, 1, 1);
  for (int j = keys.begin; j < keys.end; ++j) {
    const float p = expf(qr.dot(k + static_cast<long>(j) * D, lane) * a.scale - lse);
    const float dp = dor.dot(v + static_cast<long>(j) * D, lane);
    dq.axpy(p * (dp - delta), k + static_cast<long>(j) * D, lane);
  }
  dq.store(static_cast<float*>(a.dq) + (bh * a.lq + row) * D, a.scale, lane);
}

template <int D, bool kWindow>
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
  const TileRange queries = a.mask.query_tiles<kWindow>(key, 1, 1);
  for (int i = queries.begin; i < queries.end; ++i) {
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
  const auto kernel = a.mask.windowed() ? forward_fp32_kernel<D, true> : forward_fp32_kernel<D, false>;
  kernel<<<dim3((a.lq + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
}

template <int D>
void launch(const BackwardArgs& a, cudaStream_t stream) {
  const bool w = a.mask.windowed();
  const auto dkdv = w ? backward_dkdv_fp32_kernel<D, true> : backward_dkdv_fp32_kernel<D, false>;
  const auto dq = w ? backward_dq_fp32_kernel<D, true> : backward_dq_fp32_kernel<D, false>;
  dkdv<<<dim3((a.lk + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
  dq<<<dim3((a.lq + kWarps - 1) / kWarps, a.bh), kWarps * 32, 0, stream>>>(a);
}

}  // namespace

template <int D>
void forward_fp32(const ForwardArgs& a, cudaStream_t stream) {
  launch<D>(a, stream);
}
template <int D>
void backward_fp32(const BackwardArgs& a, cudaStream_t stream) {
  launch<D>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                      \
  template void forward_fp32<D>(const ForwardArgs&, cudaStream_t);      \
  template void backward_fp32<D>(const BackwardArgs&, cudaStream_t);
RUNNER_FLASH_MMA_SYNC_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
