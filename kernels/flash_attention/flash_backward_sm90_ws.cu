// FlashAttention backward on Hopper, warp-specialized: the fused backward of
// flash_backward_sm90.cu (dK, dV in registers; dQ summed in an fp32 buffer with atomics;
// the same step, backward_sm90.cuh), with its loads taken off the computing warps.
//
// Block: three warpgroups (384 threads) per (128-key tile, batch*head) of the block order of
// tile_scheduler.hpp, or on a persistent grid (BackwardArgs::persistent; auto where the tiles
// fill more than one wave) as many blocks as fit, each drawing its next tile from a counter
// (next_block). The loading warp publishes each tile in a shared-memory slot (two, by tile
// parity) with the tile's K/V load; the consumers and the dQ writer read it once K and V have
// landed, and a tile past the end stops them. A K/V "empty" barrier (the consumer warps after the
// last MMA that reads the tile's K, the dQ writer once it has read the slot) lets a later tile's K
// and V into its buffer, while the next tile's first Q/dO stages load as the consumers free them;
// the ring's positions and the turns run on from tile to tile. At D = 64 with bulk dQ the last
// MMA on a tile's K is its last dQ, issued in the next tile's first step (version 30).
//  * Warpgroup 0, the producer, gives registers away (setmaxnreg to 24); one warp loads. Lane
//    0 issues tensor-map box loads (TMA, 64 columns x rows, 128-byte swizzle = the SW128
//    layout of the wgmma descriptors; zeros past the sequence end and past d): a tile's K and
//    V once, then per step the Q and dO tiles (kStepQ queries: 128 at D = 64, 64 at D = 128)
//    into a ring of kStages stages.
//    The 32 lanes copy the step's L and delta rows (fp32, cp.async, zeros past the end)
//    and arrive on the stage's "full" mbarrier when their copies land.
//  * Warpgroups 1 and 2, the consumers, take registers (setmaxnreg to 240) and own 64 keys each.
//    Per step they wait for the stage's full barrier, meet at one named barrier of their 256
//    threads (both warpgroups' dS^T of the step before is in shared memory for dQ, and the
//    dS^T buffer this step overwrites is no longer read), run the step, and hand the stage
//    back: one arrival per consumer warp on its "empty" barrier. The producer runs up to
//    kStages steps ahead; no block-wide barrier after the start. With ping-pong
//    (BackwardArgs::pingpong) the two warpgroups alternate the step's two MMA issue points
//    (sm90::Turns). At D = 64 a step is 128 queries (version 21): S^T and dP^T are 64 keys x
//    128 queries per warpgroup, dV and dK contract over 128 queries, and dQ is split by
//    queries (bwd90::DqSplit::kQueries), so every dQ element goes into the L2 once a step, not
//    once per warpgroup; there are no registers left to hold K and V (version 14 held them at
//    64-query steps; at 128, ptxas spilled 96 bytes), so they are read from shared memory.
// Shared memory: K, V 128 x D (two buffers at D = 64, one at D = 128); kStages x (Q, dO)
// kStepQ x D; two dS^T [128 x kStepQ] tiles; L and delta per stage; the barriers: 194 KiB at
// either head dim (D = 128: 3 stages, D = 64: 2).
// Bulk dQ (kBulkDq, option backward: warp_specialized_bulk_dq): instead of float2 atomics from
// the consumers' registers, each consumer warpgroup stores its step's dQ tile (64 queries x 64
// columns, fp32) into its own 16 KiB shared buffer and arrives on a named barrier; warp 1 of
// the producer warpgroup (the dQ writer) adds the tile into dq_accum with one
// cp.reduce.async.bulk .add.f32 of 16 KiB (element-wise atomic in L2), waits until the copy
// engine has read the buffer and hands it back through a second named barrier. dq_accum is
// then tiled (flash_launch.hpp, dq_tiled_offset) so a tile is one contiguous 16 KiB run.
// 226 KiB at either head dim (+ 32 KiB). No slack for aligning the base: the block's dynamic
// shared memory starts 1024-aligned (the SW128 layout's period), which the kernel checks.
// FLOPs and bytes: as the fused backward. Layouts no tensor map describes (a broadcast head
// stride) run the fused kernel instead (launch_backward_sm90 decides). Measured speed: README.md.
#include <cuda.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backward_sm90.cuh"
#include "dependent_launch.cuh"
#include "tensor_map.hpp"
#include "tma.cuh"

namespace kernels::flash::detail {
namespace {

using bwd90::kDkvKeys;
// Queries per step: 128 at D = 64 (every MMA of the step 128 wide or deep, and each dQ element
// reduced once: bwd90::DqSplit::kQueries), 64 at D = 128 (no room in registers for more).
template <int D>
constexpr int kStepQ = D == 64 ? 128 : 64;
template <int D>
constexpr int kDsBytes = bwd90::kDsBytes<kStepQ<D>>;
// What the consumers' 240 registers hold beyond the step's accumulators (version 23): dS^T for
// dK at both head dims (dK reads it from registers, not shared memory, and the warpgroup's barrier
// after storing it goes), and at D = 128 the first two of K's eight 16-column steps for S^T. Both
// cut the shared-memory reads of a step, which bound it at D = 128 (ncu_v22: L1/TEX 78 %). More K
// steps (3 at D = 128, 2 at D = 64) spill, and then ptxas serializes every wgmma.
template <int D>
constexpr int kKRegisterSteps = D == 128 ? 2 : 0;

constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
// The block starts with 168 registers a thread (384 x 168 of the SM's 64 K) and setmaxnreg only
// moves them between its warpgroups: 128 x 24 + 256 x 240 is all of them. (A producer at 32
// left the consumers' increase waiting forever for registers the block never had.)
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;
constexpr int kConsumerWarps = 8;  // arrivals that free a stage
constexpr int kStepBarrier = 1;    // named barrier of the 256 consumer threads (2 + wg: unused since version 23)
// Bulk dQ: 4 + wg "tile wg stored" (consumer warpgroup wg arrives, the writer warp syncs) and
// 6 + wg "buffer wg free" (the writer arrives, the warpgroup syncs); 128 + 32 threads each.
constexpr int kDqFullBarrier = 4, kDqEmptyBarrier = 6, kDqBarrierThreads = 160;
constexpr int kDqTileBytes = bwd90::kDqTileRows * 64 * 4;  // one warpgroup's dQ tile of a step, fp32
constexpr int kTurnBarrier = 8;  // ping-pong (BackwardArgs::pingpong): sm90::Turns on barriers 8 and 9
__device__ __forceinline__ void dq_barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kDqBarrierThreads) : "memory");
}
__device__ __forceinline__ void dq_barrier_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kDqBarrierThreads) : "memory");
}

struct Params {
  CUtensorMap q, dout, k, v;
  BackwardArgs a;
};

// A tile's fields in its shared-memory slot, written by the loading warp's lane 0 before the
// tile's K/V arrive.expect_tx; read by the consumers and the dQ writer once K and V have landed.
// kTag: with Ring::kCarryDq, the tile's TileStatus (whether the slot holds a tile, and whether
// one follows); the consumers test that, not the block index against the number of blocks, which
// they would keep in a register (ptxas spilled it at d 64, and its reload stalled every tile
// start: Nsight Compute's stall samples, version 30). Otherwise the tile's block of the order (the
// end: blocks or past), as before version 30: there a status only moved ptxas's registers, and the
// windowed d 128 backward ran slower (NOTES, version 31).
enum TileField { kTag, kHeadRow0, kKey0, kFirst, kSteps, kDkHead, kDvHead, kTileFields };
enum TileStatus : long long { kEnd = -1, kMore = 0, kLast = 1 };  // no tile; a tile may follow; none will

template <int D, bool kBulkDq>
struct Ring {
  static constexpr int kStages = D == 64 ? 2 : 3;
  // Two K/V buffers at D = 64 (version 29; version 19 had them at 64-query steps): a persistent
  // block's next K and V load under its tile's steps. Under a short window a tile has few steps
  // (3 at 256 keys), and waiting for K and V after the last MMA was a good part of each. At
  // D = 128 there is no room: the next K and V load once the tile's last MMAs are done.
  static constexpr int kKvBuffers = D == 64 ? 2 : 1;
  // Version 30: with two K/V buffers and bulk dQ, a tile's last dQ is issued in the block's next
  // tile (consume), and the slot says whether one follows (kLast).
  static constexpr bool kCarryDq = kBulkDq && kKvBuffers > 1;
  static constexpr int kQ = kStepQ<D>;
  static constexpr int kKBytes = kDkvKeys * D * 2, kQBytes = kQ * D * 2;
  static constexpr int kDqBytes = kBulkDq ? 2 * kDqTileBytes : 0;  // one dQ tile per consumer warpgroup
  static constexpr int kBarriers = 2 * kKvBuffers + 2 * kStages;
  static constexpr int kSlots = 2 * kTileFields;  // one set per tile parity
  static constexpr int bytes() {
    return 2 * kKvBuffers * kKBytes + 2 * kStages * kQBytes + 2 * kDsBytes<D> + kDqBytes + 2 * kStages * kQ * 4 +
           8 * kSlots + 8 * kBarriers;
  }

  std::uint8_t* base;
  __device__ explicit Ring(std::uint8_t* raw) : base(raw) {}
  // Tile t's K/V buffer, and the phase of its barriers it is (the buffer's n-th use: phase n).
  static __device__ int kv_buffer(int t) { return t % kKvBuffers; }
  static __device__ int kv_parity(int t) { return (t / kKvBuffers) & 1; }
  __device__ std::uint8_t* k(int t) const { return base + kv_buffer(t) * 2 * kKBytes; }
  __device__ std::uint8_t* v(int t) const { return k(t) + kKBytes; }
  __device__ std::uint8_t* q(int s) const { return base + 2 * kKvBuffers * kKBytes + s * 2 * kQBytes; }
  __device__ std::uint8_t* dout(int s) const { return q(s) + kQBytes; }
  __device__ std::uint8_t* ds() const { return base + 2 * kKvBuffers * kKBytes + 2 * kStages * kQBytes; }
  __device__ float* dq(int wg) const { return reinterpret_cast<float*>(ds() + 2 * kDsBytes<D> + wg * kDqTileBytes); }
  __device__ float* lse(int s) const { return reinterpret_cast<float*>(ds() + 2 * kDsBytes<D> + kDqBytes) + s * kQ; }
  __device__ float* delta(int s) const { return lse(kStages) + s * kQ; }
  // Tile t's block of the order, head offsets, first key, its query tiles (TileField; re-read,
  // not kept in registers, as in flash_dkdv_sm90_kernel); tile t + 2 reuses tile t's set.
  __device__ volatile long long* slot(int t) const {
    return reinterpret_cast<long long*>(delta(kStages)) + (t & 1) * kTileFields;
  }
  __device__ std::uint64_t* bar(int i) const {
    return reinterpret_cast<std::uint64_t*>(reinterpret_cast<long long*>(delta(kStages)) + kSlots) + i;
  }
  __device__ std::uint64_t* kv_full(int t) const { return bar(kv_buffer(t)); }
  __device__ std::uint64_t* full(int s) const { return bar(kKvBuffers + s); }
  __device__ std::uint64_t* empty(int s) const { return bar(kKvBuffers + kStages + s); }
  __device__ std::uint64_t* kv_empty(int t) const { return bar(kKvBuffers + 2 * kStages + kv_buffer(t)); }
};

// A tile of work: the 128 keys at k0 of head bh, against query tiles first .. first + steps - 1
// (all of them, or under a causal mask or a window those that see a key of the tile). Block
// `block` of the key_blocks x bh
// order of tile_scheduler.hpp; block >= blocks is the end.
struct Tile {
  int block;
  long bh;
  int k0, first, steps;
};
template <int D, bool kWindow>
__device__ __forceinline__ Tile tile_of(const BackwardArgs& a, int block) {
  constexpr int kQ = kStepQ<D>;
  const int key_blocks = (a.lk + kDkvKeys - 1) / kDkvKeys;
  const TileSlot slot = tile_slot(block, key_blocks, a.bh, a.head_group);
  Tile w;
  w.block = block;
  w.k0 = slot.rank * kDkvKeys;  // first tiles have the most query tiles under a causal mask
  w.bh = slot.head;
  // Before k0 no query sees these keys (causal), nor after the window of the last one.
  const TileRange queries = a.mask.query_tiles<kWindow>(w.k0, kDkvKeys, kQ);
  w.first = queries.begin;
  w.steps = queries.count<kWindow>();
  return w;
}


// Warp 0 of the producer warpgroup: per tile of the block (one, or a persistent block's tiles
// drawn by next_block once the previous tile's last Q/dO load is issued), once the consumers are
// done with the previous tile's K and V: the tile's slot, then K and V, then per step Q and dO
// (TMA, lane 0) and L and delta (cp.async, every lane) into the ring, whose positions run on
// from tile to tile. A block past the end goes into the slot with no data, and everyone stops.
template <int D, bool kBulkDq, bool kWindow>
__device__ __forceinline__ void produce(const Params& p, const Ring<D, kBulkDq>& ring, int blocks) {
  using R = Ring<D, kBulkDq>;
  const BackwardArgs& a = p.a;
  const int lane = threadIdx.x % 32;
  auto box = [&](const CUtensorMap* map, const Layout& at, std::uint8_t* dst, int rows, std::uint64_t* bar, long bh,
                 int row0) {
    const int head = static_cast<int>(bh % at.heads), batch = static_cast<int>(bh / at.heads);
#pragma unroll
    for (int panel = 0; panel < D / 64; ++panel)
      sm90::tma_load_4d(dst + panel * rows * 128, map, bar, 64 * panel, row0, head, batch);
  };
  if (lane == 0) {
    sm90::prefetch_tensor_map(&p.q);
    sm90::prefetch_tensor_map(&p.dout);
  }
  // Step `step` of tile w: Q and dO (TMA, lane 0), L and delta (cp.async, every lane) into the
  // ring stage of position pos + step.
  auto load_step = [&](const Tile& w, int pos, int step) {
    const int s = (pos + step) % R::kStages, r0 = (w.first + step) * R::kQ;
    const long head_row0 = w.bh * a.lq;
    sm90::mbarrier_wait(ring.empty(s), (((pos + step) / R::kStages) & 1) ^ 1);
    if (lane == 0) {
      sm90::mbarrier_arrive_expect_tx(ring.full(s), 2 * R::kQBytes);
      box(&p.q, a.q_at, ring.q(s), R::kQ, ring.full(s), w.bh, r0);
      box(&p.dout, a.dout_at, ring.dout(s), R::kQ, ring.full(s), w.bh, r0);
    }
    sm90::load_floats_async(ring.lse(s), a.lse + head_row0 + r0, R::kQ, a.lq - r0, lane, 32);
    sm90::load_floats_async(ring.delta(s), a.delta + head_row0 + r0, R::kQ, a.lq - r0, lane, 32);
    sm90::cp_async_arrive(ring.full(s));
  };
  int pos = 0;
#pragma unroll 1
  for (int t = 0, block = blockIdx.x;; ++t) {
    if (t > 0) block = next_block(a.tile_counter, block, true);
    Tile w{block, 0, 0, 0, 0};
    if (block < blocks) w = tile_of<D, kWindow>(a, block);
    // One K/V buffer: the tile's first stages load while the consumers finish the previous tile
    // (they free the stages step by step), its K and V only once they are done with the previous
    // tile's. Two: K and V first, into the buffer the tile before last has left.
    const int early = R::kKvBuffers > 1 ? 0 : w.steps < R::kStages ? w.steps : R::kStages;
#pragma unroll 1
    for (int step = 0; step < early; ++step) load_step(w, pos, step);
    // The buffer's previous tile (t - 1, or t - 2 with two buffers) is done with K, V and its slot.
    sm90::mbarrier_wait(ring.kv_empty(t), R::kv_parity(t) ^ 1);
    if (block >= blocks) {
      if (lane == 0) {
        ring.slot(t)[kTag] = R::kCarryDq ? kEnd : block;
        sm90::mbarrier_arrive(ring.kv_full(t));  // no bytes: the phase completes now
      }
      return;
    }
    if (lane == 0) {
      volatile long long* slot = ring.slot(t);
      // Without a counter the next block is block + gridDim.x (next_block).
      slot[kTag] = !R::kCarryDq ? block : a.tile_counter == nullptr && block + gridDim.x >= blocks ? kLast : kMore;
      slot[kHeadRow0] = w.bh * a.lq;  // row of lse, delta and dq_accum where this head starts
      slot[kKey0] = w.k0;
      slot[kFirst] = w.first;
      if (kWindow) slot[kSteps] = w.steps;  // else all query tiles from first on
      slot[kDkHead] = a.dk_at.head_start(w.bh);
      slot[kDvHead] = a.dv_at.head_start(w.bh);
      sm90::mbarrier_arrive_expect_tx(ring.kv_full(t), 2 * R::kKBytes);  // releases the slot's writes
      box(&p.k, a.k_at, ring.k(t), kDkvKeys, ring.kv_full(t), w.bh, w.k0);
      box(&p.v, a.v_at, ring.v(t), kDkvKeys, ring.kv_full(t), w.bh, w.k0);
    }
#pragma unroll 1
    for (int step = early; step < w.steps; ++step) load_step(w, pos, step);
    pos += w.steps;
  }
}

// Bulk dQ: warp 1 of the producer warpgroup adds the consumers' dQ tiles (one per warpgroup and
// step) into dq_accum, in step order, with the copy engine; per tile of the block, read from its
// slot once K and V have landed (it also arrives on K/V's empty barrier, so the loading warp
// cannot publish tile t + 2 into that slot before it has been read).
template <int D, bool kWindow>
__device__ __forceinline__ void write_dq(const BackwardArgs& a, const Ring<D, true>& ring, int blocks) {
  constexpr int kQ = kStepQ<D>, kTileFloats = kDqTileBytes / 4;
  const int lane = threadIdx.x % 32;
  // dq_accum's tiles are 64 rows x 64 columns (dq_tiled_offset); a step covers kQ / 64 x D / 64.
  const int q_steps = (a.lq + kQ - 1) / kQ, row_tiles = (a.lq + 63) / 64;
  const std::uint32_t buf0 = smem_addr(ring.dq(0));
  // Warpgroup w adds the next tile of the step: columns 64w.. at D = 128, queries 64w.. at D = 64
  // (DqSplit::kColumns, kQueries); a 128-query step's second tile may lie past the last row.
  constexpr int kPanels = D / 64, kStepTiles = kQ / 64 * kPanels;
  static_assert(bwd90::kDqSplit<D, kQ> != bwd90::DqSplit::kKeys, "each warpgroup adds its own tile");
#pragma unroll 1
  for (int t = 0;; ++t) {
    sm90::mbarrier_wait(ring.kv_full(t), Ring<D, true>::kv_parity(t));
    volatile long long* slot = ring.slot(t);
    const long long tag = slot[kTag], head_row0 = slot[kHeadRow0];
    // Without a window a key tile's query tiles run to the last (tile_of).
    const int first = static_cast<int>(slot[kFirst]), steps = kWindow ? static_cast<int>(slot[kSteps]) : q_steps - first;
    __syncwarp();
    if (lane == 0) sm90::mbarrier_arrive(ring.kv_empty(t));
    if (Ring<D, true>::kCarryDq ? tag == kEnd : tag >= blocks) break;
    if (steps == 0) continue;
    dq_barrier_arrive(kDqEmptyBarrier + 0);  // both buffers start free
    dq_barrier_arrive(kDqEmptyBarrier + 1);
    const long bh = static_cast<long>(head_row0 / a.lq);
    float* dst = a.dq_accum + (bh * row_tiles * kPanels + first * kStepTiles) * kTileFloats;
    int row_tile = first * (kQ / 64);  // the step's first 64-row tile
    // Each buffer goes back as soon as the copy engine has read it, so a warpgroup ahead of the
    // other (ping-pong) does not wait for the other's tile to be added before it stores its next.
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
#pragma unroll
      for (int wg = 0; wg < 2; ++wg) {
        dq_barrier_sync(kDqFullBarrier + wg);
        const bool inside = kPanels == 2 || row_tile + wg < row_tiles;
        if (lane == 0 && inside) {
          sm90::bulk_reduce_add_f32(dst + wg * kTileFloats, buf0 + wg * kDqTileBytes, kDqTileBytes);
          sm90::bulk_commit_group();
          sm90::bulk_wait_group_read<0>();  // the copy engine has read the buffer
        }
        __syncwarp();
        if (step + 1 < steps) dq_barrier_arrive(kDqEmptyBarrier + wg);
      }
      dst += kStepTiles * kTileFloats;
      row_tile += kQ / 64;
    }
  }
  if (lane == 0) sm90::bulk_wait_group<0>();
}

// Bulk dQ, a consumer warpgroup: its dQ tile of a step into its shared buffer (fragment rows
// 16 warp + g + 8r, columns 8i + 2t; 8-column blocks swizzled with the row, dq_tiled_offset),
// then handed to the writer warp.
// buf: the buffer's shared-memory address; element (row, col) at 4 dq_chunk_index(row, col)
// bytes, which for rows 16 warp + g + 8r (row % 8 = g) is the expression below.
__device__ __forceinline__ void stage_dq(std::uint32_t buf, const float (&acc)[32], int wg, int warp, int g, int t) {
  dq_barrier_sync(kDqEmptyBarrier + wg);
  const std::uint32_t row = buf + ((16 * warp + g) * 64 + 2 * t) * 4;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(row + r * 8 * 64 * 4 + ((i ^ g) << 5)),
                   "f"(acc[4 * i + 2 * r]), "f"(acc[4 * i + 2 * r + 1])
                   : "memory");
  sm90::fence_proxy_async();  // read next by the copy engine
  dq_barrier_arrive(kDqFullBarrier + wg);
}

// One consumer warpgroup (wg 0 or 1): its 64 keys of each of the block's tiles through every
// step; the tile comes from its slot once K and V have landed, and K/V's empty barrier gets one
// arrival per warp after the last MMA on the tile's K and V: before dK and dV are stored, so a
// later tile's K and V load under those stores, or (kCarryDq) after the next tile's first step.
template <typename T, int D, bool kBulkDq, int DH, bool kWindow>
__device__ __forceinline__ void consume(const BackwardArgs& a, const Ring<D, kBulkDq>& ring, int blocks, int wg) {
  using R = Ring<D, kBulkDq>;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
  const float scale_log2 = a.scale * kLog2e;
  constexpr int kQ = kStepQ<D>;
  const int lq = a.lq, q_tiles = (lq + kQ - 1) / kQ;
  // A warpgroup's dQ reads both warpgroups' dS^T rows of the step before (bwd90::DqSplit), so
  // they meet once a step: those rows are stored, and the buffer this step overwrites is free.
  // (Split by keys, dQ would read only its own rows, and with ping-pong they need not meet.)
  const bool meet = !(bwd90::kDqSplit<D, kQ> == bwd90::DqSplit::kKeys && a.pingpong);
  auto step_barrier = [meet] {
    if (meet) asm volatile("bar.sync %0, 256;\n" ::"n"(kStepBarrier) : "memory");
  };
  const sm90::Turns turns{a.pingpong, wg, kTurnBarrier};
  turns.start();
  // Version 30 (kCarryDq: D = 64, bulk dQ): a tile's last dQ is issued in the next tile's first
  // step, under that step's dV and dK, where the step's own dQ product would be dropped; not
  // after the loop with nothing beside it. The tile's K stays in its buffer (two at D = 64) until
  // then, and its K/V empty arrival waits for that step. A tile with no steps, or the block's end,
  // issues it alone, as does a block's last tile when it is known to be the last (no tile counter:
  // a grid of one block per tile, where waiting for the end's slot only delayed it). The bulk writer
  // warp adds the dQ tiles in the order they come, whatever tile the consumers are on.
  constexpr bool kCarryDq = R::kCarryDq;
  int pos = 0;
  // kCarryDq: steps since dQ was last issued alone (dkdv_step's StepPlace::step, which is the
  // tile's own step index otherwise); a tile that starts at chain > 0 has the tile before's last dQ
  // to issue.
  int chain = 0;
  auto release_kv = [&](int tile) {
    // K and V were last read by wgmma (async proxy) or ld.shared (generic: k_rows); the next
    // tile's TMA writes them through the async proxy.
    sm90::fence_proxy_async();
    if (lane == 0) sm90::mbarrier_arrive(ring.kv_empty(tile));
  };
  // The dQ of the last step (`step`) alone, once both warpgroups' dS^T rows of it are stored.
  auto issue_last_dq = [&](std::uint32_t k_addr, int r0, int step, auto add_dq) {
    step_barrier();
    const bwd90::StepTiles tiles{k_addr, 0, 0, 0, nullptr, nullptr, ring.ds(), k_addr};
    const bwd90::StepPlace at{wg, warp, g, t, 0, r0, step, a.d, a.mask, scale_log2, 2 + wg};
    bwd90::last_dq<T, D, kQ>(tiles, at, add_dq);
  };
#pragma unroll 1
  for (int tile = 0;; ++tile) {
    sm90::mbarrier_wait(ring.kv_full(tile), R::kv_parity(tile));
    const std::uint32_t k_addr = smem_addr(ring.k(tile)), v_addr = smem_addr(ring.v(tile));
    volatile long long* slot = ring.slot(tile);
    const int status = kCarryDq ? static_cast<int>(slot[kTag]) : kMore;
    const bool end = kCarryDq ? status < 0 : slot[kTag] >= blocks;  // kEnd, or a block past the last
    if (!kCarryDq && end) break;
    const int first = static_cast<int>(slot[kFirst]);
    const int steps = end ? 0 : kWindow ? static_cast<int>(slot[kSteps]) : q_tiles - first;
    auto head_row0 = [&] { return static_cast<long>(slot[kHeadRow0]); };
    auto wg_key0 = [&] { return static_cast<int>(slot[kKey0]) + 64 * wg; };
    auto dq_dst = [&](int r0) {
      return a.dq_accum + (head_row0() + r0 + bwd90::dq_row0<D, kQ>(wg) + 16 * warp + g) * D +
             bwd90::dq_col0<D, kQ>(wg) + 2 * t;
    };
    auto place = [&](int step) {
      return bwd90::StepPlace{wg,   warp, g, t, wg_key0(), (first + step) * kQ, kCarryDq ? chain : step,
                              a.d,  a.mask, scale_log2, 2 + wg};
    };
    // The bulk sink ignores r0: the writer warp knows each tile's rows.
    auto add_dq = [&](const float(&acc_dq)[32], int r0) {  // dQ rows of the query tile at r0
      if constexpr (kBulkDq) {
        stage_dq(smem_addr(ring.dq(wg)), acc_dq, wg, warp, g, t);
      } else {
        bwd90::add_dq_rows(dq_dst(r0), acc_dq, r0 + bwd90::dq_row0<D, kQ>(wg) + 16 * warp + g, lq, D,
                           bwd90::dq_col0<D, kQ>(wg), a.d);
      }
    };
    if (kCarryDq && chain > 0 && steps <= 0) {  // no step of this tile to issue it in
      issue_last_dq(smem_addr(ring.k(tile - 1)), 0, chain - 1, add_dq);
      release_kv(tile - 1);
      chain = 0;
    }
    if (end) break;

    float acc_dk[D / 2], acc_dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc_dk[i] = acc_dv[i] = 0.f;
    bwd90::KRows<kKRegisterSteps<D>> k_rows;
    if constexpr (kKRegisterSteps<D> > 0)
      sm90::load_a_fragments<kDkvKeys, 16 * kKRegisterSteps<D>>(k_rows.k, ring.k(tile), 64 * wg + 16 * warp, g, t);
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
      const int s = (pos + step) % R::kStages;
      sm90::mbarrier_wait(ring.full(s), ((pos + step) / R::kStages) & 1);
      step_barrier();
      const bool carried = kCarryDq && step == 0 && chain > 0;
      const std::uint32_t k_dq = carried ? smem_addr(ring.k(tile - 1)) : k_addr;  // K of the dQ it issues
      const bwd90::StepTiles tiles{k_addr,      v_addr,        smem_addr(ring.q(s)), smem_addr(ring.dout(s)),
                                   ring.lse(s), ring.delta(s), ring.ds(),            k_dq};
      // Whether this is the block's last issue point is known only at the next slot: Turns::finish.
      bwd90::dkdv_step<T, D, true, kQ, true, DH, kWindow>(acc_dk, acc_dv, tiles, place(step), add_dq, turns, false,
                                                         k_rows);
      if (lane == 0) sm90::mbarrier_arrive(ring.empty(s));
      if (carried) release_kv(tile - 1);
      if (kCarryDq) ++chain;
    }
    const bool carry = kCarryDq && status != kLast;
    if (!carry && steps > 0) {
      issue_last_dq(k_addr, (first + steps - 1) * kQ, kCarryDq ? chain - 1 : steps - 1, add_dq);
      chain = 0;
    }
    // The slot is read before K/V's empty barrier: with two buffers, that arrival lets the loading
    // warp publish tile + 2 into it.
    const int key = wg_key0() + 16 * warp + g;
    const long long dk_head = slot[kDkHead], dv_head = slot[kDvHead];
    if (!carry || steps <= 0) release_kv(tile);

    const float dk_scale[2] = {a.scale, a.scale}, one[2] = {1.f, 1.f};
    store_rows<T, D>(acc_dk, static_cast<std::uint16_t*>(a.dk) + dk_head, a.dk_at.row, key, a.lk, a.d, t, dk_scale);
    store_rows<T, D>(acc_dv, static_cast<std::uint16_t*>(a.dv) + dv_head, a.dv_at.row, key, a.lk, a.d, t, one);
    pos += steps;
  }
  turns.finish();
}

template <typename T, int D, bool kBulkDq, int DH, bool kWindow>
__global__ void __launch_bounds__(kThreads, 1) flash_backward_sm90_ws(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  // The driver places dynamic shared memory 1024-aligned on Hopper (after the 1 KiB it reserves
  // per block), and Ring::bytes() has no room to align it: fail loudly if that ever changes.
  if (smem_addr(smem_raw) % 1024 != 0) {
    if (threadIdx.x == 0) printf("flash_backward_sm90_ws: dynamic shared memory not 1024-aligned\n");
    __trap();
  }
  using R = Ring<D, kBulkDq>;
  const R ring(smem_raw);
  const BackwardArgs& a = p.a;
  const int blocks = (a.lk + kDkvKeys - 1) / kDkvKeys * a.bh;  // tiles of work; a persistent grid has fewer blocks

  if (threadIdx.x == 0) {
    for (int b = 0; b < R::kKvBuffers; ++b) {
      sm90::mbarrier_init(ring.kv_full(b), 1);
      // The consumer warps after a tile's last MMA, and the dQ writer once it has read the slot.
      sm90::mbarrier_init(ring.kv_empty(b), kConsumerWarps + (kBulkDq ? 1 : 0));
    }
    for (int i = 0; i < R::kStages; ++i) {
      sm90::mbarrier_init(ring.full(i), 1 + 32);  // the TMA thread's arrive.expect_tx, one cp.async arrival per lane
      sm90::mbarrier_init(ring.empty(i), kConsumerWarps);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();
  // Launched as a dependent of the delta pass: delta, the zeroed dQ buffer and tile counter are
  // its writes. The conversion after this kernel may launch now and waits for it the same way.
  dependent_wait();
  dependent_release();

  if (threadIdx.x < 128) {
    sm90::setmaxnreg_dec<kProducerRegisters>();
    // Warp 1 adds the dQ tiles (bulk dQ), warp 0 loads; separate branches, so neither keeps the
    // other's values live at the producer's registers.
    const int warp = threadIdx.x / 32;
    if (warp == 1 && kBulkDq) {
      if constexpr (kBulkDq) write_dq<D, kWindow>(a, ring, blocks);
    } else if (warp == 0) {
      produce<D, kBulkDq, kWindow>(p, ring, blocks);
    }
  } else {
    sm90::setmaxnreg_inc<kConsumerRegisters>();
    consume<T, D, kBulkDq, DH, kWindow>(a, ring, blocks, threadIdx.x / 128 - 1);
  }
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// kWindow: the instance built for sliding windows (mask.hpp).
template <bool kWindow, typename T, int D, bool kBulkDq, int DH = D>
bool launch(const BackwardArgs& args, cudaStream_t stream) {
  constexpr int smem = Ring<D, kBulkDq>::bytes();
  static_assert(smem <= 232448, "over the 227 KiB of shared memory a Hopper block may opt into");
  Params p{};
  p.a = args;
  if (!(encode_tensor_map(&p.q, args.q, args.q_at, args.bh, args.lq, args.d, args.dtype, kStepQ<D>) &&
        encode_tensor_map(&p.dout, args.dout, args.dout_at, args.bh, args.lq, args.d, args.dtype, kStepQ<D>) &&
        encode_tensor_map(&p.k, args.k, args.k_at, args.bh, args.lk, args.d, args.dtype, kDkvKeys) &&
        encode_tensor_map(&p.v, args.v, args.v_at, args.bh, args.lk, args.d, args.dtype, kDkvKeys)))
    return false;
  // Q, dO, L, delta of a head stream through the kernel, and its fp32 dQ accumulator is added
  // to in the L2 (atomics or bulk reduce) by every key tile.
  const auto kernel = flash_backward_sm90_ws<T, D, kBulkDq, DH, kWindow>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  // Fixed for an instance on a device: asked once, not on every launch (small shapes are host-bound).
  static const int per_sm = [&] {
    int n = 1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem);
    return n;
  }();
  const int key_tiles = (args.lk + kDkvKeys - 1) / kDkvKeys;
  p.a.head_group = head_group_in_flight(args.bh, 2LL * args.lq * args.d * 2 + 8LL * args.lq + 4LL * args.lq * args.d,
                                        args.head_group, key_tiles, args.mask.causal(), per_sm);
  const long long grid = persistent_grid(args.persistent, static_cast<long long>(key_tiles) * args.bh, per_sm,
                                         args.tile_counter, stream, &p.a.tile_counter, args.counter_zeroed);
  launch_maybe_dependent(args.dependent_launch, kernel, static_cast<unsigned>(grid), kThreads, smem, stream, p);
  return true;
}

template <bool kWindow, typename T, int D>
bool launch_shape(const BackwardArgs& a, cudaStream_t stream) {
  if constexpr (D == 64) {
    return a.bulk_dq ? launch<kWindow, T, 64, true>(a, stream) : launch<kWindow, T, 64, false>(a, stream);
  } else {
    static_assert(D == 128, "the warp-specialized backward is built for kernel head dims 64 and 128");
    if (!a.bulk_dq) return launch<kWindow, T, 128, false>(a, stream);
    // head dims 65..128 in the d 128 tiles; S^T and dP^T contract over 80, 96 or 128 columns
    if (a.d <= 80) return launch<kWindow, T, 128, true, 80>(a, stream);
    if (a.d <= 96) return launch<kWindow, T, 128, true, 96>(a, stream);
    return launch<kWindow, T, 128, true>(a, stream);
  }
}

}  // namespace

template <typename T, int D>
bool dkdv_wgmma_ws(const BackwardArgs& a, cudaStream_t stream) {
  return a.mask.windowed() ? launch_shape<true, T, D>(a, stream) : launch_shape<false, T, D>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                   \
  template bool dkdv_wgmma_ws<__half, D>(const BackwardArgs&, cudaStream_t);         \
  template bool dkdv_wgmma_ws<__nv_bfloat16, D>(const BackwardArgs&, cudaStream_t);
RUNNER_FLASH_WGMMA_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
