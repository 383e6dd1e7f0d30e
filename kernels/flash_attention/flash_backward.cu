// FlashAttention-2 backward on tensor cores (fp16 / bf16 inputs, fp32 accumulation).
//
// Given Q, K, V, dO, the forward's row log-sum-exp L and delta = rowsum(O * dO), it
// recomputes P = exp(scale * Q K^T - L) tile by tile (never storing the seq x seq matrix) and
//   dV = P^T dO,   dP = dO V^T,   dS = P * (dP - delta),   dQ = scale * dS K,   dK = scale * dS^T Q.
// FLOPs counted: 2.5x forward = 10 * bh * lq * lk * d (halved when causal). This version
// spends 14 (two kernels recompute S and dP) to stay deterministic: no atomics, every
// output element is summed by one thread in a fixed order, so results repeat bit for bit.
// Bytes from HBM: Q, K, V, dO, dQ, dK, dV once each plus L and delta; the re-reads of
// Q/dO (per key tile) and K/V (per query tile) come from L2.
//  * dkdv kernel: one block (4 warps, 64 keys, 16 per warp) per (key tile, batch*head),
//    looping over query tiles (64 rows; 32 at d = 128 so that dK, dV, S^T and dP^T all stay
//    in registers: 242 registers, no spill). S^T = K Q^T and dP^T = V dO^T land in C layout
//    with keys as rows, so P^T and dS^T feed P^T dO and dS^T Q as A operands directly.
//  * dq kernel: the forward's shape (64 queries per block, loop over 64-key tiles), with
//    dP = dO V^T and dQ += dS K.
// Masks (mask.hpp): query tiles that see none of a key tile (and key tiles a query tile does
// not see) are skipped; only tiles crossing the rule or the sequence end are masked. kWindow
// builds the sliding-window kernels.
//
// Measured speed and what limits it: README.md (version log and profiles).
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "flash_launch.hpp"
#include "mask.cuh"
#include "mma.cuh"

namespace kernels::flash::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// A operand (16 rows from row0, all D columns) read from a shared tile with row stride LD.
template <int D, int LD>
__device__ __forceinline__ void load_a(std::uint32_t (&f)[D / 16][4], const std::uint16_t* s, int row0, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a_frag<LD>(f[kk], s, row0, kk * 16, lane);
}

// C[16 x N] = A[16 x D] * M^T where M is N x D row-major in shared memory (B[k][n] = M[n][k]).
template <typename T, int D, int LD, int N>
__device__ __forceinline__ void mma_abt(float (&c)[N / 8][4], const std::uint32_t (&a)[D / 16][4],
                                        const std::uint16_t* m, int lane) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
#pragma unroll
  for (int n = 0; n < N / 8; n += 2)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t b[4];
      load_b_pair_nk<LD>(b, m, n * 8, kk * 16, lane);
      const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
      mma_16816<T>(c[n], a[kk], b0);
      mma_16816<T>(c[n + 1], a[kk], b1);
    }
}

// acc[16 x D] += X[16 x K] * M where X is in C layout (fp32, cast here) and M is K x D
// row-major in shared memory.
template <typename T, int D, int LD, int K>
__device__ __forceinline__ void mma_cm(float (&acc)[D / 8][4], const float (&x)[K / 8][4], const std::uint16_t* m,
                                       int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const std::uint32_t a[4] = {pack2<T>(x[2 * kk][0], x[2 * kk][1]), pack2<T>(x[2 * kk][2], x[2 * kk][3]),
                                pack2<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                                pack2<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, m + (kk * 16 + (lane & 15)) * LD + n * 8 + (lane >> 4) * 8);
      const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
      mma_16816<T>(acc[n], a, b0);
      mma_16816<T>(acc[n + 1], a, b1);
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void store_rows(std::uint16_t* dst, const float (&acc)[D / 8][4], float mul, int row,
                                           int rows, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row + 8 * r >= rows) continue;
    std::uint16_t* p = dst + static_cast<long>(row + 8 * r) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<std::uint32_t*>(p + n * 8 + 2 * t) = pack2<T>(acc[n][2 * r] * mul, acc[n][2 * r + 1] * mul);
  }
}

template <int D>
__host__ __device__ constexpr int dkdv_query_tile() { return D >= 128 ? 32 : 64; }

template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kThreads) flash_backward_dkdv_kernel(BackwardArgs a, int head_group) {
  constexpr int LD = D + kPad;
  constexpr int TK = 16 * kWarps;               // keys per block
  constexpr int TQ = dkdv_query_tile<D>();     // queries per step
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sK = smem;
  std::uint16_t* sV = sK + TK * LD;
  std::uint16_t* sQ = sV + TK * LD;
  std::uint16_t* sdO = sQ + TQ * LD;
  float* sL = reinterpret_cast<float*>(sdO + TQ * LD);  // scale*log2(e)-domain L of the tile's queries
  float* sDelta = sL + TQ;

  const int key_blocks = (a.lk + TK - 1) / TK;
  const TileSlot slot = tile_slot(blockIdx.x, key_blocks, gridDim.x / key_blocks, head_group);
  const int k0 = slot.rank * TK;  // first key tiles first: the most query tiles under a causal mask
  const long bh = slot.head;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int lq = a.lq, lk = a.lk;
  const auto* q = static_cast<const std::uint16_t*>(a.q) + bh * lq * D;
  const auto* k = static_cast<const std::uint16_t*>(a.k) + bh * lk * D;
  const auto* v = static_cast<const std::uint16_t*>(a.v) + bh * lk * D;
  const auto* dout = static_cast<const std::uint16_t*>(a.dout) + bh * lq * D;
  const float* lse = a.lse + bh * lq;
  const float* delta = a.delta + bh * lq;
  const float scale_log2 = a.scale * kLog2e;

  load_tile_async<TK, D, kThreads>(sK, k + static_cast<long>(k0) * D, lk - k0, tid);
  load_tile_async<TK, D, kThreads>(sV, v + static_cast<long>(k0) * D, lk - k0, tid);
  cp_async_commit();

  const int row0 = warp * 16 + g;
  const int warp_key = k0 + warp * 16;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  const TileRange queries = a.mask.query_tiles<kWindow>(k0, TK, TQ);
  for (int qt = queries.begin; qt < queries.end; ++qt) {
    const int q0 = qt * TQ;
    load_tile_async<TQ, D, kThreads>(sQ, q + static_cast<long>(q0) * D, lq - q0, tid);
    load_tile_async<TQ, D, kThreads>(sdO, dout + static_cast<long>(q0) * D, lq - q0, tid);
    cp_async_commit();
    for (int i = tid; i < TQ; i += kThreads) {
      const bool ok = q0 + i < lq;
      sL[i] = ok ? lse[q0 + i] * kLog2e : INFINITY;
      sDelta[i] = ok ? delta[q0 + i] : 0.f;
    }
    cp_async_wait_all();
    __syncthreads();

    std::uint32_t kf[D / 16][4];
    load_a<D, LD>(kf, sK, warp * 16, lane);
    float s[TQ / 8][4];  // S^T: rows = keys, cols = queries
    mma_abt<T, D, LD, TQ>(s, kf, sQ, lane);
#pragma unroll
    for (int n = 0; n < TQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = exp2f(s[n][e] * scale_log2 - sL[n * 8 + 2 * t + (e & 1)]);  // now P^T
    if (a.mask.needs_mask_dkdv<kWindow>(q0, TQ, warp_key, 16)) {
      mask_fragment<TQ, kWindow, FragmentRows::keys>(s, a.mask, warp_key + g, q0, t, 0.f);
    }

    std::uint32_t vf[D / 16][4];
    load_a<D, LD>(vf, sV, warp * 16, lane);
    float dp[TQ / 8][4];  // dP^T = V dO^T
    mma_abt<T, D, LD, TQ>(dp, vf, sdO, lane);
#pragma unroll
    for (int n = 0; n < TQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - sDelta[n * 8 + 2 * t + (e & 1)]);  // dS^T

    mma_cm<T, D, LD, TQ>(dv, s, sdO, lane);
    mma_cm<T, D, LD, TQ>(dk, dp, sQ, lane);
    __syncthreads();  // every warp is done with this query tile
  }
  cp_async_wait_all();  // K and V were still in flight if no query tile was left

  store_rows<T, D>(static_cast<std::uint16_t*>(a.dk) + (bh * lk + k0) * D, dk, a.scale, row0, lk - k0, t);
  store_rows<T, D>(static_cast<std::uint16_t*>(a.dv) + (bh * lk + k0) * D, dv, 1.f, row0, lk - k0, t);
}

template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kThreads) flash_backward_dq_kernel(BackwardArgs a, int head_group) {
  constexpr int LD = D + kPad;
  constexpr int TQ = 16 * kWarps;
  constexpr int TK = 64;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sQ = smem;
  std::uint16_t* sdO = sQ + TQ * LD;
  std::uint16_t* sK = sdO + TQ * LD;
  std::uint16_t* sV = sK + TK * LD;

  const int q_blocks = (a.lq + TQ - 1) / TQ;
  const TileSlot slot = tile_slot(blockIdx.x, q_blocks, gridDim.x / q_blocks, head_group);
  const int q0 = (q_blocks - 1 - slot.rank) * TQ;  // last query tiles first: the most key tiles when causal
  const long bh = slot.head;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int lq = a.lq, lk = a.lk;
  const auto* q = static_cast<const std::uint16_t*>(a.q) + bh * lq * D;
  const auto* k = static_cast<const std::uint16_t*>(a.k) + bh * lk * D;
  const auto* v = static_cast<const std::uint16_t*>(a.v) + bh * lk * D;
  const auto* dout = static_cast<const std::uint16_t*>(a.dout) + bh * lq * D;
  const float scale_log2 = a.scale * kLog2e;

  load_tile_async<TQ, D, kThreads>(sQ, q + static_cast<long>(q0) * D, lq - q0, tid);
  load_tile_async<TQ, D, kThreads>(sdO, dout + static_cast<long>(q0) * D, lq - q0, tid);
  cp_async_commit();

  const int row0 = warp * 16 + g;
  const int warp_row = q0 + warp * 16;
  float row_l[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + row0 + 8 * r;
    row_l[r] = row < lq ? a.lse[bh * lq + row] * kLog2e : INFINITY;
    row_delta[r] = row < lq ? a.delta[bh * lq + row] : 0.f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;

  const TileRange keys = a.mask.key_tiles<kWindow>(q0, TQ, TK);
  for (int kt = keys.begin; kt < keys.end; ++kt) {
    const int k0 = kt * TK;
    load_tile_async<TK, D, kThreads>(sK, k + static_cast<long>(k0) * D, lk - k0, tid);
    load_tile_async<TK, D, kThreads>(sV, v + static_cast<long>(k0) * D, lk - k0, tid);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    std::uint32_t qf[D / 16][4];
    load_a<D, LD>(qf, sQ, warp * 16, lane);
    float s[TK / 8][4];
    mma_abt<T, D, LD, TK>(s, qf, sK, lane);
#pragma unroll
    for (int n = 0; n < TK / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = exp2f(s[n][e] * scale_log2 - row_l[e >> 1]);
    if (a.mask.needs_mask<kWindow>(warp_row, 16, k0, TK)) {
      mask_fragment<TK, kWindow>(s, a.mask, warp_row + g, k0, t, 0.f);
    }
    std::uint32_t df[D / 16][4];
    load_a<D, LD>(df, sdO, warp * 16, lane);
    float dp[TK / 8][4];
    mma_abt<T, D, LD, TK>(dp, df, sV, lane);
#pragma unroll
    for (int n = 0; n < TK / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - row_delta[e >> 1]);
    mma_cm<T, D, LD, TK>(dq, dp, sK, lane);
    __syncthreads();
  }
  store_rows<T, D>(static_cast<std::uint16_t*>(a.dq) + (bh * lq + q0) * D, dq, a.scale, row0, lq - q0, t);
}

template <typename T, int D>
void launch(const BackwardArgs& a, cudaStream_t stream) {
  constexpr int LD = D + kPad;
  {
    constexpr int TK = 16 * kWarps, TQ = dkdv_query_tile<D>();
    constexpr int smem = (2 * TK + 2 * TQ) * LD * 2 + 2 * TQ * 4;
    auto kernel = a.mask.windowed() ? flash_backward_dkdv_kernel<T, D, true> : flash_backward_dkdv_kernel<T, D, false>;
    if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int group = head_group(a.bh, 2LL * a.lq * D * 2 + 8LL * a.lq, a.head_group);  // Q, dO, L, delta of a head
    kernel<<<(a.lk + TK - 1) / TK * a.bh, kThreads, smem, stream>>>(a, group);
  }
  {
    constexpr int TQ = 16 * kWarps, TK = 64;
    constexpr int smem = (2 * TQ + 2 * TK) * LD * 2;
    auto kernel = a.mask.windowed() ? flash_backward_dq_kernel<T, D, true> : flash_backward_dq_kernel<T, D, false>;
    if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int group = head_group(a.bh, 2LL * a.lk * D * 2, a.head_group);  // K and V of a head
    kernel<<<(a.lq + TQ - 1) / TQ * a.bh, kThreads, smem, stream>>>(a, group);
  }
}

}  // namespace

template <typename T, int D>
void backward_mma_sync(const BackwardArgs& a, cudaStream_t stream) {
  launch<T, D>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                       \
  template void backward_mma_sync<__half, D>(const BackwardArgs&, cudaStream_t);         \
  template void backward_mma_sync<__nv_bfloat16, D>(const BackwardArgs&, cudaStream_t);
RUNNER_FLASH_MMA_SYNC_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
