// What the wgmma dK/dV kernels share (flash_backward_sm90.cu: fused and deterministic;
// flash_backward_sm90_ws.cu: warp-specialized): the tile sizes, one 64-query step of one
// 64-key warpgroup (S^T, dP^T, P^T, dS^T, dV, dK and the fused dQ of the step before), the
// dQ product and its atomics. The schedule around the step (who loads, which barrier says a
// stage has landed) is the kernels' own; the step's comments are in flash_backward_sm90.cu.
#pragma once
#include <cstdint>

#include "epilogue.cuh"
#include "flash_launch.hpp"
#include "mask.cuh"
#include "wgmma.cuh"

namespace kernels::flash::detail::bwd90 {

using sm90::Wgmma;

constexpr int kDkvKeys = 128;  // 64 per warpgroup
constexpr int kDkvQ = 64;      // query rows per step (the warp-specialized kernel: 128 at D = 64, kStepQ)
template <int Q = kDkvQ>
constexpr int kDsBytes = kDkvKeys * Q * 2;  // dS^T of one Q-query step, for the fused dQ product
constexpr int kDqTileRows = 64;             // a warpgroup's dQ tile of a step: 64 queries x 64 columns

// dQ rows of one step, [64 queries x 64 columns] per warpgroup, added into dq_accum.
// Columns col0 + 8i.. at or past `cols` (a padded head dim) are zero and skipped.
__device__ __forceinline__ void add_dq_rows(float* dst, const float (&acc)[32], int row, int lq, int d, int col0,
                                            int cols) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
    if (row + 8 * r < lq) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (col0 + 8 * i < cols)
          atomicAdd(reinterpret_cast<float2*>(dst + 8 * r * d + 8 * i), make_float2(acc[4 * i + 2 * r], acc[4 * i + 2 * r + 1]));
    }
}

// dQ[Q queries x D] of one step = dS K over the block's 128 keys, split between the two
// warpgroups so that each computes one m64n64 product (K MN-major), in one of three ways:
//  kColumns (D = 128, 64-query steps): warpgroup w takes output columns 64w.. over all keys;
//  kKeys (D = 64, 64-query steps): all columns over its own 64 keys (both add into the same
//    rows, so the L2 sees every dQ element twice);
//  kQueries (D = 64, 128-query steps): queries 64w.. over all keys (every element once).
// kKeys reads only the warpgroup's own dS^T rows; the other two read both warpgroups'.
enum class DqSplit { kColumns, kKeys, kQueries };
template <int D, int Q>
constexpr DqSplit kDqSplit = D == 128 ? DqSplit::kColumns : Q == 64 ? DqSplit::kKeys : DqSplit::kQueries;
template <int D, int Q = kDkvQ>
__device__ __forceinline__ int dq_col0(int wg) {
  return kDqSplit<D, Q> == DqSplit::kColumns ? 64 * wg : 0;
}
template <int D, int Q = kDkvQ>
__device__ __forceinline__ int dq_row0(int wg) {
  return kDqSplit<D, Q> == DqSplit::kQueries ? 64 * wg : 0;
}
template <typename T, int D, int Q = kDkvQ>
__device__ __forceinline__ void issue_dq(float (&acc_dq)[32], std::uint32_t k_addr, std::uint32_t ds_addr, int wg) {
  constexpr DqSplit kSplit = kDqSplit<D, Q>;
  static_assert(Q == 64 || kSplit == DqSplit::kQueries, "128-query steps split dQ by queries");
  constexpr int kSteps = kSplit == DqSplit::kKeys ? 4 : kDkvKeys / 16;
  const int kk0 = kSplit == DqSplit::kKeys ? 4 * wg : 0;
  const std::uint32_t k_panel = k_addr + (kSplit == DqSplit::kColumns ? wg * kDkvKeys * 128 : 0);
  // dS^T is [128 keys x Q queries]: with 128 queries, warpgroup w's 64 are panel w.
  const std::uint32_t ds_panel = ds_addr + (kSplit == DqSplit::kQueries ? wg * kDkvKeys * 128 : 0);
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    Wgmma<T, 64>::ss_tt(acc_dq, sm90::mn_major<kDkvKeys>(ds_panel, kk0 + kk),
                        sm90::mn_major<kDkvKeys>(k_panel, kk0 + kk), kk > 0);
}

// Where the step runs: shared-memory tiles (K, V of the block; Q, dO, L, delta of the step;
// the two dS^T buffers), the thread's place in its warpgroup and the problem's bounds.
struct StepTiles {
  std::uint32_t k, v, q, dout;
  const float *lse, *delta;  // [Q] of the step's queries
  std::uint8_t* ds;          // two kDsBytes<Q> buffers (fused only)
  std::uint32_t k_dq;        // K of the step whose dQ this step issues: k, or the tile before's
};
struct StepPlace {
  int wg, warp, g, t;
  int key0;  // the warpgroup's first key
  int r0;    // the step's first query
  int step;  // index in the run of steps that hand their dQ on (dS^T buffer step & 1); 0: no dQ before
  int d;
  Mask mask;  // a sliding window only in the kernels built for one (dkdv_step's kWindow)
  float scale_log2;
  int ds_barrier;  // named barrier of the warpgroup's 128 threads (fused, dS^T from shared memory: stored)
};

// The first STEPS 16-column steps of the warpgroup's 64 K rows as A fragments, loaded once per
// key tile: S^T then reads only Q from shared memory for those steps (the warp-specialized kernel
// at D = 128, version 23, where shared-memory traffic bounds the step). STEPS = 0: none.
template <int STEPS>
struct KRows {
  static constexpr int kSteps = STEPS;
  std::uint32_t k[STEPS > 0 ? STEPS : 1][4];
};

// Turns of the warpgroups that do not take turns (the fused kernel, ping-pong off).
struct NoTurns {
  __device__ void wait() const {}
  __device__ void pass(bool) const {}
};

// One step: S^T, dP^T -> P^T, dS^T; fused: dS^T to shared memory, dQ of step - 1 issued and
// handed to dq_sink(acc_dq, r0 of step - 1) while dV += P^T dO, dK += dS^T Q run (the sink adds
// it: atomics, or a shared-memory tile for a bulk reduce). Every MMA of the step has finished on
// return, so the step's stage is free. A step has two issue points for `turns` (sm90::Turns):
// S^T with dP^T, and dQ with dV and dK; `last` says this is the warpgroup's last step.
// kDsInRegisters (fused): dK += dS^T Q takes dS^T from registers, so the warpgroup need not meet
// after storing it (dQ reads it after the next step barrier); k_rows: K steps held in registers.
// DH: the columns S^T and dP^T contract over (d 80 and 96 in the d 128 tiles: 80 or 96; else D).
// Q: the step's queries, 64 or (the warp-specialized kernel at D = 64) 128. (Version 14 held
// the warpgroup's K and V rows in registers for S^T and dP^T at D = 64 with 64-query steps; the
// 128-query steps of version 21 read each K/V byte once per 128 queries and have no registers
// left for them.)
template <typename T, int D, bool kFuseDq, int Q = kDkvQ, bool kDsInRegisters = false, int DH = D,
          bool kWindow = false, typename DqSink, typename Turn = NoTurns, int KSteps = 0>
__device__ __forceinline__ void dkdv_step(float (&acc_dk)[D / 2], float (&acc_dv)[D / 2], const StepTiles& tiles,
                                          const StepPlace& at, DqSink dq_sink, const Turn& turns = {},
                                          bool last = false, const KRows<KSteps>& k_rows = {}) {
  const int wg = at.wg, warp = at.warp, g = at.g, t = at.t;
  float st[Q / 2], dpt[Q / 2];  // S^T and dP^T: rows = this warpgroup's keys, columns = queries
  turns.wait();
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < DH / 16; ++kk) {
    if (kk < KSteps)
      Wgmma<T, Q>::rs(st, k_rows.k[kk < KSteps ? kk : 0], sm90::k_major<Q>(tiles.q, 0, kk), kk > 0);
    else
      Wgmma<T, Q>::ss(st, sm90::k_major<kDkvKeys>(tiles.k, 64 * wg, kk), sm90::k_major<Q>(tiles.q, 0, kk), kk > 0);
  }
  sm90::wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < DH / 16; ++kk)
    Wgmma<T, Q>::ss(dpt, sm90::k_major<kDkvKeys>(tiles.v, 64 * wg, kk), sm90::k_major<Q>(tiles.dout, 0, kk), kk > 0);
  sm90::wgmma_commit();
  turns.pass(false);
  sm90::wgmma_wait<1>();  // S^T is done; dP^T still runs under the exponentials
  sm90::pin(st);

  // P^T for every element first, then the mask on the tiles that need it: a mask test
  // inside the exponential's expression became a branch per element, each waiting on its
  // own shared-memory load of L (Nsight Compute: 36 % of the kernel's stall samples).
#pragma unroll
  for (int i = 0; i < Q / 8; ++i) {
    const float2 l = *reinterpret_cast<const float2*>(tiles.lse + 8 * i + 2 * t);  // queries 8i + 2t, + 1
    const float l0 = l.x * kLog2e, l1 = l.y * kLog2e;
    st[4 * i + 0] = exp2f(st[4 * i + 0] * at.scale_log2 - l0);
    st[4 * i + 1] = exp2f(st[4 * i + 1] * at.scale_log2 - l1);
    st[4 * i + 2] = exp2f(st[4 * i + 2] * at.scale_log2 - l0);
    st[4 * i + 3] = exp2f(st[4 * i + 3] * at.scale_log2 - l1);
  }
  const int r0 = at.r0, key0 = at.key0;
  const Mask& mask = at.mask;
  if (mask.needs_mask_dkdv<kWindow>(r0, Q, key0, 64)) {  // rows are keys here, columns queries
    mask_fragment<Q, kWindow, FragmentRows::keys>(st, mask, key0 + 16 * warp + g, r0, t, 0.f);
  }
  sm90::wgmma_wait<0>();
  sm90::pin(dpt);
#pragma unroll
  for (int i = 0; i < Q / 8; ++i) {
    const float2 d = *reinterpret_cast<const float2*>(tiles.delta + 8 * i + 2 * t);
    dpt[4 * i + 0] = st[4 * i + 0] * (dpt[4 * i + 0] - d.x);
    dpt[4 * i + 1] = st[4 * i + 1] * (dpt[4 * i + 1] - d.y);
    dpt[4 * i + 2] = st[4 * i + 2] * (dpt[4 * i + 2] - d.x);
    dpt[4 * i + 3] = st[4 * i + 3] * (dpt[4 * i + 3] - d.y);
  }

  std::uint32_t a_p[Q / 16][4], a_ds[Q / 16][4];
  sm90::to_a_fragments<T, Q>(a_p, st);
  sm90::to_a_fragments<T, Q>(a_ds, dpt);
  if constexpr (kFuseDq) {
    // Fragment j of step kk holds rows g + 8(j & 1) and columns 16kk + 8(j >> 1) + 2t, +1.
    // Row 64wg + 16warp + g + 8(j & 1) of panel kk / 4 (64 queries each): 128-byte rows, chunk
    // (2(kk % 4) + (j >> 1)) ^ g (rows differ by 8 keep g). This is sw128::offset with row % 8 = g
    // folded in by hand: written through the helper, the SASS of both backward kernels grew.
    std::uint8_t* ds_row = tiles.ds + (at.step & 1) * kDsBytes<Q> + (64 * wg + 16 * warp + g) * 128 + 4 * t;
#pragma unroll
    for (int kk = 0; kk < Q / 16; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<std::uint32_t*>(ds_row + (kk / 4) * kDkvKeys * 128 + 8 * (j & 1) * 128 +
                                          (((2 * (kk % 4) + (j >> 1)) ^ g) << 4)) = a_ds[kk][j];
    sm90::fence_proxy_async();  // read by this step's dK and, after the next barrier, by dQ
    // From shared memory, this warpgroup's dS^T rows are dK's A operand: its four warps must have
    // stored them.
    if constexpr (!kDsInRegisters) asm volatile("bar.sync %0, 128;\n" ::"r"(at.ds_barrier) : "memory");
  }
  sm90::pin(acc_dv);
  sm90::pin(acc_dk);
  float acc_dq[32];
  turns.wait();
  sm90::wgmma_fence();
  if constexpr (kFuseDq) {
    // At step 0 the product runs on a buffer no step wrote and is dropped: one unconditional
    // commit group per step keeps ptxas from serializing the wgmmas (warning C7514).
    issue_dq<T, D, Q>(acc_dq, tiles.k_dq, smem_addr(tiles.ds + ((at.step - 1) & 1) * kDsBytes<Q>), wg);
    sm90::wgmma_commit();
  }
#pragma unroll
  for (int kk = 0; kk < Q / 16; ++kk) Wgmma<T, D>::rs_mn(acc_dv, a_p[kk], sm90::mn_major<Q>(tiles.dout, kk), 1);
  if constexpr (kFuseDq && !kDsInRegisters) {
    // dK += dS^T Q with dS^T from shared memory (K-major): a_ds is dead before the MMAs, which
    // keeps dQ's accumulators, dK, dV and P^T within the fused kernel's register file.
    const std::uint32_t ds_addr = smem_addr(tiles.ds + (at.step & 1) * kDsBytes<Q>);
#pragma unroll
    for (int kk = 0; kk < Q / 16; ++kk)
      Wgmma<T, D>::ss_mn(acc_dk, sm90::k_major<kDkvKeys>(ds_addr, 64 * wg, kk), sm90::mn_major<Q>(tiles.q, kk), 1);
  } else {
#pragma unroll
    for (int kk = 0; kk < Q / 16; ++kk) Wgmma<T, D>::rs_mn(acc_dk, a_ds[kk], sm90::mn_major<Q>(tiles.q, kk), 1);
  }
  sm90::wgmma_commit();
  turns.pass(last);
  if constexpr (kFuseDq) {
    sm90::wgmma_wait<1>();  // dQ of the previous step has landed; dV and dK still run
    sm90::pin(acc_dq);
    if (at.step > 0) dq_sink(acc_dq, r0 - Q);
  }
  sm90::wgmma_wait<0>();
  sm90::pin(acc_dv);
  sm90::pin(acc_dk);
  sm90::pin(a_p);
  sm90::pin(a_ds);
}

// The last step's dQ (fused), once both warpgroups' dS^T rows of it are in shared memory.
template <typename T, int D, int Q = kDkvQ, typename DqSink>
__device__ __forceinline__ void last_dq(const StepTiles& tiles, const StepPlace& at, DqSink dq_sink) {
  float acc_dq[32];
  sm90::wgmma_fence();
  issue_dq<T, D, Q>(acc_dq, tiles.k_dq, smem_addr(tiles.ds + (at.step & 1) * kDsBytes<Q>), at.wg);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::pin(acc_dq);
  dq_sink(acc_dq, at.r0);
}

}  // namespace kernels::flash::detail::bwd90
