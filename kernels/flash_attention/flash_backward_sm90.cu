// FlashAttention-2 backward on Hopper warpgroup MMAs (wgmma; fp16 / bf16, fp32 accumulation).
//
// Computes what flash_backward.cu computes (dQ, dK, dV from Q, K, V, dO, L and
// delta = rowsum(O * dO)), for kernel head dims 64 and 128 on sm_90a GPUs, on strided [batch, seq, heads, d] views
// (flash_launch.hpp, Layout). Two ways to get dQ (option backward, default fused; warp_specialized
// is the fused one scheduled as flash_backward_sm90_ws.cu, with the same step, backward_sm90.cuh):
//  * fused: the dkdv kernel also forms dQ += dS K per step and adds it into an fp32
//    buffer with atomics (FlashAttention-2's way); a small kernel scales and rounds it.
//    FLOPs done = FLOPs counted: 10 * bh * lq * lk * d (halved when causal). The order of
//    the atomic additions varies from run to run, so dQ can differ in its last bits.
//  * deterministic: a second kernel (dq) recomputes S and dP per query tile; no atomics,
//    every output element is summed by one thread in a fixed order, so results repeat bit
//    for bit. FLOPs done: 14 * bh * lq * lk * d, 1.4x the count.
//  * dkdv kernel: one block of two warpgroups per (128-key tile, batch*head); each
//    warpgroup owns 64 keys and loops over 64-query tiles:
//      S^T = K Q^T and dP^T = V dO^T    (m64n64k16, both operands K-major in shared memory;
//                                        two commit groups: exp(S^T) overlaps dP^T)
//      P^T = exp(scale S^T - L), dS^T = P^T * (dP^T - delta)      (fp32 registers)
//      dV += P^T dO                     (m64nDk16, A from registers, B MN-major)
//      dK += dS^T Q                     (fused: A = dS^T from shared memory, K-major;
//                                        deterministic: A from registers)
//      fused only: dS^T goes to shared memory as a [128 keys][64 queries] tile (two, steps
//      alternate), and dQ(64 x D) = dS K as m64n64 products with both operands MN-major: at
//      d = 128 each warpgroup takes 64 output columns over all 128 keys, at d = 64 all
//      columns over its own 64 keys; float2 atomics into the fp32 buffer. The dQ of step
//      j - 1 is issued in step j, before dV and dK, so its atomics run while dV and dK are
//      on the tensor cores, and no barrier waits for the other warpgroup's dS^T mid-step.
//    dK and dV stay in fp32 registers for the whole loop (64 + 64 per thread at d = 128).
//  * dq kernel (deterministic only): one block of two warpgroups per (128-query tile,
//    batch*head); each warpgroup owns 64 queries and loops over 64-key tiles:
//      S = Q K^T, dP = dO V^T, dS = P * (dP - delta), dQ += dS K  (K MN-major)
// Blocks start in tile_scheduler.hpp's order: the longest tiles of a group of heads first.
// Q/dO tiles (dkdv) stream through a three-stage cp.async ring, K/V tiles (dq) through a
// two-stage one, in the 128-byte swizzled layout; L and delta ride along with their query
// tile. With three stages the dkdv step has one block-wide barrier (its stage has landed;
// the stage two steps back is free) instead of three.
// Causal: query tiles entirely above a key tile (and key tiles right of a query tile) are
// skipped; only tiles crossing the diagonal or a sequence end are masked (mask.cuh).
// Head dims 80 and 96 run the d = 128 kernels with columns d.. zero in shared memory; the
// fused dQ buffer keeps 128 columns, of which only the first d are added and read.
// The step-0 dQ product runs on a buffer no step wrote and is dropped: with the product
// issued only for step > 0, ptxas serialized every wgmma of the kernel (C7514).
// Measured speed, what limits it and what was tried: README.md, version log.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "epilogue.cuh"
#include "flash_launch.hpp"
#include "mask.cuh"
#include "backward_sm90.cuh"
#include "dependent_launch.cuh"
#include "wgmma.cuh"

namespace kernels::flash::detail {
namespace {

using sm90::Wgmma;

constexpr int kThreads = 256;  // two warpgroups

// ---- dK, dV: key-major (the step: backward_sm90.cuh) ----
using bwd90::kDkvKeys;
using bwd90::kDkvQ;
constexpr int kDsBytes = bwd90::kDsBytes<>;
constexpr int kQStages = 3;  // Q/dO ring: step j + 2 loads while j runs and j - 1's stage is free

template <int D, bool kFuseDq>
constexpr int dkdv_shared_bytes() {
  return (2 * kDkvKeys + 2 * kQStages * kDkvQ) * D * 2 + (kFuseDq ? 2 * kDsBytes : 0) + 2 * kQStages * kDkvQ * 4 + 64 +
         1024;
}

// kFuseDq: also dQ += dS K for the step's 64 queries, added to dq_accum (fp32) with atomics;
// otherwise dq_accum is unused and flash_dq_sm90_kernel computes dQ.
//
// Step j (64 queries), after the one barrier of the step (stage j loaded; every warp done with
// step j - 1, whose dS^T both warpgroups stored):
//   load step j + 2 into stage (j + 2) % 3 (= (j - 1) % 3)
//   S^T, dP^T -> P^T, dS^T (dS^T stored to buffer j % 2 for the fused dQ)
//   fused: dQ_{j-1} = dS_{j-1} K, issued before dV += P^T dO, dK += dS^T Q, so the atomics of
//          dQ_{j-1} run while dV and dK are on the tensor cores
// The step's MMAs all finish before the next barrier, so stage j is free at step j + 1.
template <typename T, int D, bool kFuseDq, bool kWindow>
__global__ void __launch_bounds__(kThreads, 1) flash_dkdv_sm90_kernel(const __grid_constant__ BackwardArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kKBytes = kDkvKeys * D * 2, kQBytes = kDkvQ * D * 2;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sK = sm90::align_1024(smem_raw);
  std::uint8_t* sV = sK + kKBytes;
  auto sQ = [&](int stage) { return sK + 2 * kKBytes + stage * 2 * kQBytes; };
  auto sDO = [&](int stage) { return sK + 2 * kKBytes + stage * 2 * kQBytes + kQBytes; };
  // dS^T as [128 keys][64 queries] SW128 tiles, two (steps alternate): dQ's A operand,
  // MN-major (queries along the row).
  std::uint8_t* sDS = sK + 2 * kKBytes + 2 * kQStages * kQBytes;
  float* sL = reinterpret_cast<float*>(sDS + (kFuseDq ? 2 * kDsBytes : 0));  // [stage][64] L, then [stage][64] delta
  float* sDelta = sL + kQStages * kDkvQ;
  // The block's head offsets and first key, re-read from shared memory where the loop needs
  // them: derived from the tile order they cannot be re-derived from blockIdx for free, and
  // the fused kernel sits at the register limit (kept in registers, they pushed ptxas into
  // spilling wgmma descriptors).
  volatile long long* sSlot = reinterpret_cast<long long*>(sDelta + kQStages * kDkvQ);
  const int lq = a.lq, lk = a.lk;
  const auto* q = static_cast<const std::uint16_t*>(a.q);
  const auto* dout = static_cast<const std::uint16_t*>(a.dout);

  const int key_blocks = (lk + kDkvKeys - 1) / kDkvKeys;
  const TileSlot slot = tile_slot(blockIdx.x, key_blocks, gridDim.x / key_blocks, a.head_group);
  const int k0 = slot.rank * kDkvKeys;  // first tiles have the most query tiles under a causal mask
  const long bh = slot.head;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  if (tid == 0) {
    sSlot[0] = bh * lq;  // row of lse, delta and dq_accum where this head starts
    sSlot[1] = k0;
    sSlot[2] = a.q_at.head_start(bh);  // element offsets of this head in q, dout, dk, dv
    sSlot[3] = a.dout_at.head_start(bh);
    sSlot[4] = a.dk_at.head_start(bh);
    sSlot[5] = a.dv_at.head_start(bh);
  }
  __syncthreads();
  auto head_row0 = [&] { return static_cast<long>(sSlot[0]); };
  auto wg_key0 = [&] { return static_cast<int>(sSlot[1]) + 64 * wg; };
  const float scale_log2 = a.scale * kLog2e;

  // Before k0 no query sees these keys (causal), nor after the window of the last one.
  const TileRange queries = a.mask.query_tiles<kWindow>(k0, kDkvKeys, kDkvQ);
  const int first = queries.begin;
  const int steps = queries.count<kWindow>();

  auto load_q_tile = [&](int stage, int qt) {
    const int r0 = qt * kDkvQ;
    const long row = head_row0() + r0;
    sm90::load_tile_sw128<kDkvQ, D, kThreads>(sQ(stage), q + sSlot[2] + r0 * a.q_at.row, a.q_at.row, lq - r0, a.d,
                                              tid);
    sm90::load_tile_sw128<kDkvQ, D, kThreads>(sDO(stage), dout + sSlot[3] + r0 * a.dout_at.row, a.dout_at.row,
                                              lq - r0, a.d, tid);
    sm90::load_floats_async(sL + stage * kDkvQ, a.lse + row, kDkvQ, lq - r0, tid, kThreads);
    sm90::load_floats_async(sDelta + stage * kDkvQ, a.delta + row, kDkvQ, lq - r0, tid, kThreads);
  };

  sm90::load_tile_sw128<kDkvKeys, D, kThreads>(
      sK, static_cast<const std::uint16_t*>(a.k) + a.k_at.head_start(bh) + k0 * a.k_at.row, a.k_at.row, lk - k0, a.d,
      tid);
  sm90::load_tile_sw128<kDkvKeys, D, kThreads>(
      sV, static_cast<const std::uint16_t*>(a.v) + a.v_at.head_start(bh) + k0 * a.v_at.row, a.v_at.row, lk - k0, a.d,
      tid);
  if (steps > 0) load_q_tile(0, first);
  cp_async_commit();
  if (steps > 1) {
    load_q_tile(1, first + 1);
    cp_async_commit();
  }

  float acc_dk[D / 2], acc_dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dk[i] = acc_dv[i] = 0.f;
  const std::uint32_t k_addr = smem_addr(sK), v_addr = smem_addr(sV);

  auto dq_dst = [&](int r0) {
    return a.dq_accum + (head_row0() + r0 + 16 * warp + g) * D + bwd90::dq_col0<D>(wg) + 2 * t;
  };
  auto place = [&](int step) {
    return bwd90::StepPlace{wg, warp, g, t, wg_key0(), (first + step) * kDkvQ, step, a.d, a.mask, scale_log2,
                            1 + wg};
  };
  auto add_dq = [&](const float(&acc_dq)[32], int r0) {  // dQ rows of the query tile at r0, by atomics
    bwd90::add_dq_rows(dq_dst(r0), acc_dq, r0 + 16 * warp + g, lq, D, bwd90::dq_col0<D>(wg), a.d);
  };

  for (int step = 0; step < steps; ++step) {
    const int stage = step % kQStages;
    if (step + 1 < steps) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    sm90::fence_proxy_async();
    __syncthreads();
    if (step + 2 < steps) {
      load_q_tile((step + 2) % kQStages, first + step + 2);
      cp_async_commit();
    }
    const bwd90::StepTiles tiles{k_addr, v_addr, smem_addr(sQ(stage)), smem_addr(sDO(stage)), sL + stage * kDkvQ,
                                 sDelta + stage * kDkvQ, sDS, k_addr};
    bwd90::dkdv_step<T, D, kFuseDq, kDkvQ, false, D, kWindow>(acc_dk, acc_dv, tiles, place(step), add_dq);
  }
  if constexpr (kFuseDq) {
    if (steps > 0) {  // the last step's dQ
      __syncthreads();  // both warpgroups' dS^T rows are in shared memory
      const bwd90::StepTiles tiles{k_addr, v_addr, 0, 0, nullptr, nullptr, sDS, k_addr};
      bwd90::last_dq<T, D>(tiles, place(steps - 1), add_dq);
    }
  }
  cp_async_wait_all();  // with no query tile to visit, the K/V loads are still in flight

  const int key = wg_key0() + 16 * warp + g;
  const float dk_scale[2] = {a.scale, a.scale}, one[2] = {1.f, 1.f};
  store_rows<T, D>(acc_dk, static_cast<std::uint16_t*>(a.dk) + sSlot[4], a.dk_at.row, key, lk, a.d, t, dk_scale);
  store_rows<T, D>(acc_dv, static_cast<std::uint16_t*>(a.dv) + sSlot[5], a.dv_at.row, key, lk, a.d, t, one);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// ---- dQ: query-major ----
constexpr int kDqQ = 128;  // 64 per warpgroup
constexpr int kDqKeys = 64;

template <int D>
constexpr int dq_shared_bytes() {
  return (2 * kDqQ + 4 * kDqKeys) * D * 2 + 1024;
}

template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kThreads, 1) flash_dq_sm90_kernel(const __grid_constant__ BackwardArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kQBytes = kDqQ * D * 2, kKBytes = kDqKeys * D * 2;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sQ = sm90::align_1024(smem_raw);
  std::uint8_t* sDO = sQ + kQBytes;
  auto sK = [&](int stage) { return sQ + 2 * kQBytes + stage * 2 * kKBytes; };
  auto sV = [&](int stage) { return sQ + 2 * kQBytes + stage * 2 * kKBytes + kKBytes; };

  const int lq = a.lq, lk = a.lk;
  const long long ldk = a.k_at.row, ldv = a.v_at.row;
  const int q_blocks = (lq + kDqQ - 1) / kDqQ;
  const TileSlot slot = tile_slot(blockIdx.x, q_blocks, gridDim.x / q_blocks, a.head_group);
  const int q0 = (q_blocks - 1 - slot.rank) * kDqQ;  // last tiles first: the longest under a causal mask
  const long bh = slot.head;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const auto* kg = static_cast<const std::uint16_t*>(a.k) + a.k_at.head_start(bh);
  const auto* vg = static_cast<const std::uint16_t*>(a.v) + a.v_at.head_start(bh);
  const float scale_log2 = a.scale * kLog2e;
  const int wg_row0 = q0 + 64 * wg;

  float l2[2], dlt[2];  // this lane's two rows: L in log2 units, delta
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wg_row0 + 16 * warp + g + 8 * r;
    l2[r] = row < lq ? a.lse[bh * lq + row] * kLog2e : 0.f;
    dlt[r] = row < lq ? a.delta[bh * lq + row] : 0.f;
  }

  const TileRange keys = a.mask.key_tiles<kWindow>(q0, kDqQ, kDqKeys);
  const int first = keys.begin;                 // 0 without a window
  const int key_tiles = keys.count<kWindow>();  // may be 0 with one (rows see no key)
  kg += static_cast<long long>(first) * kDqKeys * ldk;
  vg += static_cast<long long>(first) * kDqKeys * ldv;
  const int lk_left = lk - first * kDqKeys;  // keys from there on

  sm90::load_tile_sw128<kDqQ, D, kThreads>(
      sQ, static_cast<const std::uint16_t*>(a.q) + a.q_at.head_start(bh) + q0 * a.q_at.row, a.q_at.row, lq - q0, a.d,
      tid);
  sm90::load_tile_sw128<kDqQ, D, kThreads>(
      sDO, static_cast<const std::uint16_t*>(a.dout) + a.dout_at.head_start(bh) + q0 * a.dout_at.row, a.dout_at.row,
      lq - q0, a.d, tid);
  if (key_tiles > 0) {
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(0), kg, ldk, lk_left, a.d, tid);
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(0), vg, ldv, lk_left, a.d, tid);
  }
  cp_async_commit();
  if (key_tiles > 1) {
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(1), kg + kDqKeys * ldk, ldk, lk_left - kDqKeys, a.d, tid);
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(1), vg + kDqKeys * ldv, ldv, lk_left - kDqKeys, a.d, tid);
    cp_async_commit();
  }

  float acc[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc[i] = 0.f;
  const std::uint32_t q_addr = smem_addr(sQ), do_addr = smem_addr(sDO);

  for (int kt = 0; kt < key_tiles; ++kt) {
    const int stage = kt & 1, k0 = (first + kt) * kDqKeys;
    if (kt + 1 < key_tiles) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    sm90::fence_proxy_async();
    __syncthreads();
    const std::uint32_t k_addr = smem_addr(sK(stage)), v_addr = smem_addr(sV(stage));

    float s[kDqKeys / 2], dp[kDqKeys / 2];
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDqKeys>::ss(s, sm90::k_major<kDqQ>(q_addr, 64 * wg, kk), sm90::k_major<kDqKeys>(k_addr, 0, kk), kk > 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDqKeys>::ss(dp, sm90::k_major<kDqQ>(do_addr, 64 * wg, kk), sm90::k_major<kDqKeys>(v_addr, 0, kk),
                            kk > 0);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(s);
    sm90::pin(dp);

    // P for every element, the mask only on tiles that need it (no branch per element).
#pragma unroll
    for (int i = 0; i < kDqKeys / 2; ++i) s[i] = exp2f(s[i] * scale_log2 - l2[(i >> 1) & 1]);
    if (a.mask.needs_mask<kWindow>(wg_row0, 64, k0, kDqKeys)) {
      mask_fragment<kDqKeys, kWindow>(s, a.mask, wg_row0 + 16 * warp + g, k0, t, 0.f);
    }
#pragma unroll
    for (int i = 0; i < kDqKeys / 2; ++i) s[i] *= dp[i] - dlt[(i >> 1) & 1];

    std::uint32_t a_ds[kDqKeys / 16][4];
    sm90::to_a_fragments<T, kDqKeys>(a_ds, s);
    sm90::pin(acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDqKeys / 16; ++kk) Wgmma<T, D>::rs_mn(acc, a_ds[kk], sm90::mn_major<kDqKeys>(k_addr, kk), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(acc);
    sm90::pin(a_ds);

    __syncthreads();
    if (kt + 2 < key_tiles) {
      const int next = (kt + 2) * kDqKeys;  // from the range's first key
      sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(stage), kg + next * ldk, ldk, lk_left - next, a.d, tid);
      sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(stage), vg + next * ldv, ldv, lk_left - next, a.d, tid);
      cp_async_commit();
    }
  }

  const float dq_scale[2] = {a.scale, a.scale};
  store_rows<T, D>(acc, static_cast<std::uint16_t*>(a.dq) + a.dq_at.head_start(bh), a.dq_at.row,
                   wg_row0 + 16 * warp + g, lq, a.d, t, dq_scale);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// dQ = scale * the fp32 sums of the fused kernel ([bh * lq, D] rows, or the bulk-dQ kernel's
// tiles, dq_tiled_offset; the first d columns used), rounded to T into the strided dq; four
// elements per thread.
template <typename T, int D>
__global__ void dq_from_accum_kernel(const __grid_constant__ BackwardArgs a) {
  dependent_wait();  // for the dK/dV/dQ kernel's sums
  const int quads = a.d / 4, q_tiles = (a.lq + 63) / 64;
  const long n = static_cast<long>(a.bh) * a.lq * quads;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / quads;
    const int col = static_cast<int>(i % quads) * 4;
    const long bh = row / a.lq;
    const long long at =
        a.bulk_dq ? dq_tiled_offset(bh, static_cast<int>(row % a.lq), col, q_tiles, D) : row * D + col;
    const float4 x = *reinterpret_cast<const float4*>(a.dq_accum + at);
    auto* dst = static_cast<std::uint16_t*>(a.dq) + a.dq_at.head_start(bh) + (row % a.lq) * a.dq_at.row + col;
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(pack2<T>(x.x * a.scale, x.y * a.scale), pack2<T>(x.z * a.scale, x.w * a.scale));
  }
}

// kWindow: the instances built for sliding windows (mask.hpp).
template <typename T, int D, bool kWindow>
void launch(const BackwardArgs& args, cudaStream_t stream) {
  BackwardArgs a = args;
  const int dkdv_blocks = (a.lk + kDkvKeys - 1) / kDkvKeys * a.bh;
  // Q, dO, L, delta of a head stream through the dkdv kernel.
  a.head_group = head_group(a.bh, 2LL * a.lq * a.d * 2 + 8LL * a.lq, args.head_group);
  if (a.dq_accum != nullptr) {
    if (!(a.warp_specialized && dkdv_wgmma_ws<T, D>(args, stream))) {
      if (a.bulk_dq) {  // zeroed in the tiled layout; the fused kernel adds into the row-major one
        cudaMemsetAsync(a.dq_accum, 0, sizeof(float) * a.bh * a.lq * D, stream);
        a.bulk_dq = false;
      }
      constexpr int smem = dkdv_shared_bytes<D, true>();
      auto kernel = flash_dkdv_sm90_kernel<T, D, true, kWindow>;
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      kernel<<<dkdv_blocks, kThreads, smem, stream>>>(a);
    }
    const long n = static_cast<long>(a.bh) * a.lq * (a.d / 4);
    const int blocks = static_cast<int>(std::min<long>((n + 255) / 256, 8192));
    launch_maybe_dependent(a.dependent_launch, dq_from_accum_kernel<T, D>, static_cast<unsigned>(blocks), 256, 0,
                           stream, a);
    return;
  }
  {
    constexpr int smem = dkdv_shared_bytes<D, false>();
    auto kernel = flash_dkdv_sm90_kernel<T, D, false, kWindow>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    kernel<<<dkdv_blocks, kThreads, smem, stream>>>(a);
  }
  {
    constexpr int smem = dq_shared_bytes<D>();
    auto kernel = flash_dq_sm90_kernel<T, D, kWindow>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int blocks = (a.lq + kDqQ - 1) / kDqQ * a.bh;
    a.head_group = head_group(a.bh, 2LL * a.lk * a.d * 2, args.head_group);  // K and V of a head
    kernel<<<blocks, kThreads, smem, stream>>>(a);
  }
}

}  // namespace

template <typename T, int D>
void backward_wgmma(const BackwardArgs& a, cudaStream_t stream) {
  if (a.mask.windowed()) return launch<T, D, true>(a, stream);
  launch<T, D, false>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                    \
  template void backward_wgmma<__half, D>(const BackwardArgs&, cudaStream_t);         \
  template void backward_wgmma<__nv_bfloat16, D>(const BackwardArgs&, cudaStream_t);
RUNNER_FLASH_WGMMA_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
