// FlashAttention-2 forward on tensor cores (fp16 / bf16 inputs, fp32 accumulation).
//
// Computes, per (batch*head, query row i):  O_i = softmax(scale * Q_i K^T + mask) V and
// L_i = logsumexp_j(scale * Q_i K_j) (natural log), for backward's recomputation.
// FLOPs: 4 * bh * lq * lk * d (two matmuls), halved when causal.
// Bytes from HBM: Q, O once (2 * bh * lq * d * 2 B), L (4 * bh * lq B); K and V once per
// query tile (2 * bh * lk * d * 2 B * lq / 64), mostly served by L2.
// Grid: one block of 4 warps per (64-query tile, batch*head), last tiles first (under a
// causal mask they are the longest); one loop over 64-key tiles. Each warp owns 16 query
// rows: S = Q K^T lands in mma.sync m16n8k16 accumulators, the online softmax (running max
// m, sum l) runs on them in fp32 registers, P is cast to the input type straight into the
// A operand of P V (no shared memory round trip), O accumulates in fp32 registers and is
// cast once at the end. Operands come from shared memory through ldmatrix (transposed
// for V). K for the next tile is fetched with cp.async while P V runs, V while Q K^T runs.
// Tiles 64 x 64: Q, K, V take 52 KiB of shared memory at d = 128 and the accumulators fit
// in registers without spilling (216 registers at d = 128, two blocks per SM).
// Masks (mask.hpp): key tiles no row of the query tile sees are skipped (past the diagonal when
// causal; before the window too with one); only tiles that cross the rule (or the sequence end)
// are masked; rows with no key left give zeros, no NaN. kWindow builds the sliding-window
// kernels; with it false the mask code is the causal-or-none code it always was.
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
constexpr int kTileQ = 16 * kWarps;
constexpr int kTileK = 64;

template <typename T, int D, bool kWindow>
// Three blocks per SM where registers allow it without spilling (d <= 64).
__global__ void __launch_bounds__(kThreads, D <= 64 ? 3 : 2) flash_forward_kernel(const std::uint16_t* __restrict__ q,
                                                                 const std::uint16_t* __restrict__ k,
                                                                 const std::uint16_t* __restrict__ v,
                                                                 std::uint16_t* __restrict__ out,
                                                                 float* __restrict__ lse, Mask mask,
                                                                 float scale, int head_group) {
  constexpr int LD = D + kPad;
  const int lq = mask.lq, lk = mask.lk;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* sQ = smem;
  std::uint16_t* sK = sQ + kTileQ * LD;
  std::uint16_t* sV = sK + kTileK * LD;

  // Last query tiles first (over a group of heads, tile_scheduler.hpp): under a causal mask they
  // have the most key tiles, and starting them early keeps the tail of the grid short.
  const int tiles = (lq + kTileQ - 1) / kTileQ;
  const TileSlot slot = tile_slot(blockIdx.x, tiles, gridDim.x / tiles, head_group);
  const int q0 = (tiles - 1 - slot.rank) * kTileQ;
  const long bh = slot.head;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* qg = q + (bh * lq + q0) * D;
  const std::uint16_t* kg = k + bh * lk * D;
  const std::uint16_t* vg = v + bh * lk * D;
  const float scale_log2 = scale * kLog2e;

  const TileRange keys = mask.key_tiles<kWindow>(q0, kTileQ, kTileK);
  const int key_tiles = keys.end;

  load_tile_async<kTileQ, D, kThreads>(sQ, qg, lq - q0, tid);
  if (keys.size() > 0) {
    const int first = keys.begin * kTileK;
    load_tile_async<kTileK, D, kThreads>(sK, kg + static_cast<long>(first) * D, lk - first, tid);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  const int row0 = warp * 16 + g;  // this lane's rows: row0 and row0 + 8 of the tile
  std::uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a_frag<LD>(qf[kk], sQ, warp * 16, kk * 16, lane);

  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of scale*log2(e)*s per row
  float l[2] = {0.f, 0.f};              // this lane's share of the running sum

  for (int kt = keys.begin; kt < key_tiles; ++kt) {
    const int k0 = kt * kTileK;
    load_tile_async<kTileK, D, kThreads>(sV, vg + static_cast<long>(k0) * D, lk - k0, tid);
    cp_async_commit();

    float s[kTileK / 8][4];
#pragma unroll
    for (int n = 0; n < kTileK / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int n = 0; n < kTileK / 8; n += 2)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        std::uint32_t b[4];
        load_b_pair_nk<LD>(b, sK, n * 8, kk * 16, lane);
        const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma_16816<T>(s[n], qf[kk], b0);
        mma_16816<T>(s[n + 1], qf[kk], b1);
      }

    const int warp_row = q0 + warp * 16;
    if (mask.needs_mask<kWindow>(warp_row, 16, k0, kTileK)) {
      mask_fragment<kTileK, kWindow>(s, mask, warp_row + g, k0, t, -INFINITY);
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < kTileK / 8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
      // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf.
      const float base = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m[r] - base);
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kTileK / 8; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] * scale_log2 - base);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] * scale_log2 - base);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * r] *= alpha;
        acc[n][2 * r + 1] *= alpha;
      }
    }

    cp_async_wait_all();
    __syncthreads();  // V has landed; every warp is done with K
    if (kt + 1 < key_tiles) {
      load_tile_async<kTileK, D, kThreads>(sK, kg + static_cast<long>(k0 + kTileK) * D, lk - k0 - kTileK, tid);
      cp_async_commit();
    }

#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      const std::uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, sV + (kk * 16 + (lane & 15)) * LD + n * 8 + (lane >> 4) * 8);
        const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma_16816<T>(acc[n], a, b0);
        mma_16816<T>(acc[n + 1], a, b1);
      }
    }
    cp_async_wait_all();
    __syncthreads();  // next K has landed; every warp is done with V
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    const float inv = total > 0.f ? 1.f / total : 0.f;
    const int row = q0 + row0 + 8 * r;
    if (row < lq) {
      std::uint16_t* orow = out + (bh * lq + row) * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<std::uint32_t*>(orow + n * 8 + 2 * t) =
            pack2<T>(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv);
      if (t == 0) lse[bh * lq + row] = total > 0.f ? m[r] / kLog2e + logf(total) : INFINITY;
    }
  }
}

template <typename T, int D>
void launch(const ForwardArgs& a, cudaStream_t stream) {
  constexpr int smem = (kTileQ + 2 * kTileK) * (D + kPad) * 2;
  auto kernel = a.mask.windowed() ? flash_forward_kernel<T, D, true> : flash_forward_kernel<T, D, false>;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  const int blocks = (a.lq + kTileQ - 1) / kTileQ * a.bh;
  const int group = head_group(a.bh, 2LL * a.lk * D * 2, a.head_group);  // K and V of a head
  kernel<<<blocks, kThreads, smem, stream>>>(static_cast<const std::uint16_t*>(a.q),
                                             static_cast<const std::uint16_t*>(a.k),
                                             static_cast<const std::uint16_t*>(a.v), static_cast<std::uint16_t*>(a.out),
                                             a.lse, a.mask, a.scale, group);
}

}  // namespace

template <typename T, int D>
void forward_mma_sync(const ForwardArgs& a, cudaStream_t stream) {
  launch<T, D>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                      \
  template void forward_mma_sync<__half, D>(const ForwardArgs&, cudaStream_t);          \
  template void forward_mma_sync<__nv_bfloat16, D>(const ForwardArgs&, cudaStream_t);
RUNNER_FLASH_MMA_SYNC_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
