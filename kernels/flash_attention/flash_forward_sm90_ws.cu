// FlashAttention forward on Hopper, warp-specialized (FlashAttention-3's producer/consumer
// split): the same function as flash_forward_sm90.cu (O = softmax(scale * Q K^T + mask) V and
// the row log-sum-exp L; strided [batch, seq, heads, d] views; kernel head dims 64 and 128,
// 80 and 96 in the d 128 tiles), scheduled differently. DH, the head dim the MMAs run (80, 96 or
// the tile's D; version 25): S contracts over DH / 16 steps and O is DH columns wide, so d 80
// and 96 skip the MMAs of the tile's zero columns (wgmma N may be any multiple of 8: P V reads
// V's first DH columns, across its second 64-column panel).
//
// Block: a producer and two consumer warpgroups (384 threads) per (128-query tile, batch*head)
// at D = 128; at D = 64 a producer and one consumer (256 threads, two blocks to an SM) per
// 64-query tile or three consumers (512 threads) per 192-query tile, by the grid (Shape); in
// the block order of tile_scheduler.hpp.
//  * Warpgroup 0, the producer, gives registers away (setmaxnreg to 32) and only loads: warp 0
//    the Q tile and the K tiles, warp 1 the V tiles, into a ring of kStages shared-memory
//    stages. With TMA (ForwardArgs::tma, the default) one thread per warp issues a tensor-map
//    box load per 64 columns (tile rows x 128 bytes, the hardware's 128-byte swizzle, which is
//    the SW128 layout the wgmma descriptors name) that completes on the stage's "full"
//    mbarrier; rows past the sequence end and columns past d arrive as zeros. Without TMA the
//    warp's 32 lanes copy with cp.async and arrive on the barrier when their copies land.
//  * Warpgroups 1.., the consumers, take registers (setmaxnreg to 232 with two, 160 with three)
//    and own 64 query rows each. Per key tile j they issue S_j = Q K_j^T and O += P_{j-1} V_{j-1} together, run
//    the softmax of S_j while P_{j-1} V_{j-1} is still on the tensor cores (the pipelined
//    schedule of flash_forward_sm90.cu), and hand stages back through "empty" mbarriers: K_j
//    once S_j has landed, V_{j-1} once its product has. No block-wide barrier after the start:
//    the producer runs up to kStages tiles ahead of the slowest consumer, and with ping-pong
//    (sm90::Turns, round robin with three) the consumers take turns issuing MMAs, so one
//    exponentiates while another's MMAs run.
// Persistent grid (ForwardArgs::persistent, plugin option forward_persistent; auto where the
// tiles fill more than one wave): SMs x resident blocks, each looping over tiles of the same
// order, each next tile the one nobody has taken yet, drawn from a counter (next_block,
// tile_scheduler.hpp). Producer warp 0 picks each tile and publishes it in a shared-memory slot
// with the tile's Q load; the others read it once Q's full barrier completes, and a tile past
// the end stops them. The ring's stages and phases run on
// from tile to tile and Q has an "empty" mbarrier (consumers arrive once Q is in registers at
// D = 128, after their tile's last S at D = 64; the V warp once it has read the slot), so the
// producer loads the next tile's Q and first K/V stages while the consumers finish the last.
// Key tiles (KT): 128 rows, or 176 at D = 128 without a causal mask (version 22, FlashAttention-3's
// choice there): a tile's fixed costs (barrier waits, the O rescale, the MMA groups' latency) spread
// over more keys; its S and P need 88 + 44 registers, so Q is read from shared memory.
// Shared memory: Q (tile rows) x D + kStages x (K + V) KT x D in bf16/fp16, plus 2 + 4 kStages
// mbarriers: 160 KiB at D = 128 (2 stages; 208 KiB with 176-key tiles), 120 KiB at D = 64 (3
// stages, 192 query rows), 105 KiB at D = 64 with 64 query rows (two blocks to an SM).
// FLOPs and bytes: as flash_forward_sm90.cu. Measured speed: README.md, version log.
#include <cuda.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "forward_sm90.cuh"
#include "tensor_map.hpp"
#include "tma.cuh"

namespace kernels::flash::detail {
namespace {


// The block: a producer warpgroup and C 64-row consumer warpgroups, two at D = 128 and one, two
// or three at D = 64. At D = 64 a key tile's exponentials cost as much as at D = 128 over half the
// MMA work, so a third warpgroup gives the tensor cores another warpgroup's MMAs to run while two
// exponentiate, and each K/V tile feeds 192 query rows instead of 128; but a small grid then has
// fewer, longer tiles than SMs can balance (d64_consumer_warpgroups, tile_scheduler.hpp, picks).
// The block starts with kThreads x (65536 / kThreads) registers (half as many with two blocks
// to an SM); the split keeps within them (128 x 40 + 256 x 232, 128 x 32 + 384 x 160, or
// 128 x 32 + 128 x 224). ptxas holds each role's code to its count: the producer's cp.async
// path spilled at 24, and its loop over a persistent block's tiles spills a few words at 32
// (D = 64 has no registers to spare; the spills are per tile, not per key tile).
// One consumer (C = 1, D = 64): a 64-row block of 256 threads, two resident per SM (each 128
// registers a thread at entry, 128 x 32 + 128 x 224 after the split, and 105 KiB of shared
// memory), so two blocks' tiles overlap as unsynchronized neighbours instead of taking turns; a
// small grid has twice as many, shorter tiles to spread over the SMs.
template <int D, int C>
struct Shape {
  static_assert(C == 2 || ((C == 1 || C == 3) && D == 64), "two consumer warpgroups, or one or three at D = 64");
  static constexpr int kConsumers = C;
  static constexpr int kTileQ = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kBlocksPerSm = C == 1 ? 2 : 1;
  static constexpr int kProducerRegisters = C == 2 ? 40 : 32, kConsumerRegisters = C == 3 ? 160 : C == 2 ? 232 : 224;
  static constexpr int kConsumerWarps = 4 * kConsumers;  // arrivals that free a stage: one per consumer warp
  static_assert(128 * kProducerRegisters + 128 * C * kConsumerRegisters <= 65536 / kBlocksPerSm,
                "setmaxnreg moves registers only within the block's share of the register file");
};

// Tensor maps are opaque 128-byte, 64-byte-aligned objects; TMA reads them from the kernel's
// parameter space (__grid_constant__).
struct Params {
  CUtensorMap q, k, v;
  ForwardArgs a;
};

// The shared-memory carve-up: Q, then kStages x (K, V), then the mbarriers.
template <int D, int C, int KT>
struct Ring {
  static constexpr int kTileQ = Shape<D, C>::kTileQ;
  static constexpr int kStages = D == 64 ? 3 : 2;
  static constexpr int kQBytes = kTileQ * D * 2, kTileBytes = KT * D * 2;
  static constexpr int kBarriers = 2 + 4 * kStages;
  // + the two tile slots, + alignment
  static constexpr int bytes() { return kQBytes + 2 * kStages * kTileBytes + 8 * kBarriers + 8 + 1024; }

  std::uint8_t* base;
  __device__ explicit Ring(std::uint8_t* raw) : base(sm90::align_1024(raw)) {}
  __device__ std::uint8_t* q() const { return base; }
  __device__ std::uint8_t* k(int s) const { return base + kQBytes + s * 2 * kTileBytes; }
  __device__ std::uint8_t* v(int s) const { return k(s) + kTileBytes; }
  __device__ std::uint64_t* bar(int i) const {
    return reinterpret_cast<std::uint64_t*>(base + kQBytes + 2 * kStages * kTileBytes) + i;
  }
  __device__ std::uint64_t* q_full() const { return bar(0); }
  __device__ std::uint64_t* k_full(int s) const { return bar(1 + s); }
  __device__ std::uint64_t* v_full(int s) const { return bar(1 + kStages + s); }
  __device__ std::uint64_t* k_empty(int s) const { return bar(1 + 2 * kStages + s); }
  __device__ std::uint64_t* v_empty(int s) const { return bar(1 + 3 * kStages + s); }
  __device__ std::uint64_t* q_empty() const { return bar(1 + 4 * kStages); }
  // Which block of the order tile t of this block is (two slots: tile t + 2 reuses t's).
  __device__ volatile int* tile(int t) const { return reinterpret_cast<volatile int*>(bar(kBarriers)) + (t & 1); }
};

// One tile of work: query rows q0.. of head bh against key tiles first .. first + key_tiles - 1
// (none when no row of the tile sees a key: a sliding window's queries past the keys). Block `block` of the
// tiles x bh order of tile_scheduler.hpp; a persistent block takes blocks blockIdx.x,
// blockIdx.x + gridDim.x, ... in turn, and the producer and the consumers walk the same list.
struct Work {
  long bh;
  int q0, first, key_tiles;
};

template <int D, int C, int KT, bool kWindow>
__device__ __forceinline__ Work work_of(const ForwardArgs& a, int block, int tiles) {
  constexpr int kTileQ = Shape<D, C>::kTileQ;
  const TileSlot slot = tile_slot(block, tiles, a.bh, a.head_group);
  Work w;
  w.q0 = (tiles - 1 - slot.rank) * kTileQ;  // last tiles first: under a causal mask they are the longest
  w.bh = slot.head;
  const TileRange keys = a.mask.key_tiles<kWindow>(w.q0, kTileQ, KT);
  w.first = keys.begin;               // 0 without a window
  w.key_tiles = keys.count<kWindow>();  // >= 1 without a window: every row sees key 0
  return w;
}

// ROWS x D elements into an SW128 tile by one warp with cp.async, as sm90::load_tile_sw128
// does, but in a loop the compiler keeps rolled: the producer has 32 registers (the unrolled
// copy spilled 332 bytes at D = 64 with 24).
template <int ROWS, int D>
__device__ __forceinline__ void copy_tile_by_warp(std::uint8_t* tile, const std::uint16_t* g, long long ld, int valid,
                                                  int cols, int lane) {
  constexpr int kChunks = D / 8, kRowsPerPass = 32 / kChunks;
  const int col = (lane % kChunks) * 8;
  const bool col_ok = col < cols;
#pragma unroll 1
  for (int r = lane / kChunks; r < ROWS; r += kRowsPerPass) {
    const bool ok = col_ok && r < valid;
    cp_async16(tile + sw128::offset<ROWS>(r, col), ok ? g + r * ld + col : g, ok);
  }
}

// Warps 0 (Q, K) and 1 (V) of the producer warpgroup; the other two have nothing to do. The
// ring's stages and phases run on across a persistent block's tiles (`pos` counts key tiles
// since the block started). Warp 0 picks each tile (next_block) once its previous tile's K
// loads are issued, i.e. about kStages key tiles before the consumers finish that tile, and
// publishes it in the tile slot with the Q load; warp 1 and the consumers read it there. A tile
// at or past `blocks` is the end: Q's full barrier then completes without data.
template <int D, int C, int KT, bool kWindow>
__device__ __forceinline__ void produce(const Params& p, const Ring<D, C, KT>& ring, int tiles, int blocks) {
  using R = Ring<D, C, KT>;
  constexpr int kTileQ = R::kTileQ;
  const ForwardArgs& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp > 1) return;
  const bool keys = warp == 0;
  const Layout& at = keys ? a.k_at : a.v_at;
  auto stage = [&](int pos, std::uint64_t*& full, std::uint8_t*& dst) {
    const int s = pos % R::kStages;
    sm90::mbarrier_wait(keys ? ring.k_empty(s) : ring.v_empty(s), ((pos / R::kStages) & 1) ^ 1);
    full = keys ? ring.k_full(s) : ring.v_full(s);
    dst = keys ? ring.k(s) : ring.v(s);
  };
  if (a.tma && lane != 0) return;
  const CUtensorMap* map = keys ? &p.k : &p.v;
  if (a.tma) sm90::prefetch_tensor_map(map);
  int pos = 0;
  for (int t = 0, block = blockIdx.x;; ++t) {
    if (keys) {
      sm90::mbarrier_wait(ring.q_empty(), (t & 1) ^ 1);  // everyone has read the slot and Q of tile t - 1
      if (t > 0) block = next_block(a.tile_counter, block, !a.tma);
      if (lane == 0) *ring.tile(t) = block;
      if (block >= blocks) {  // the end: complete Q's full barrier with no data
        if (lane == 0) sm90::mbarrier_arrive(ring.q_full());
        if (!a.tma) sm90::mbarrier_arrive(ring.q_full());
        return;
      }
    } else {
      sm90::mbarrier_wait(ring.q_full(), t & 1);
      block = *ring.tile(t);
      if (!a.tma) __syncwarp();  // every lane has read the slot (with TMA only lane 0 runs)
      if (lane == 0) sm90::mbarrier_arrive(ring.q_empty());  // read: warp 0 may publish tile t + 2 there
      if (block >= blocks) return;
    }
    const Work w = work_of<D, C, KT, kWindow>(a, block, tiles);
    if (a.tma) {
      const int head = static_cast<int>(w.bh % at.heads), batch = static_cast<int>(w.bh / at.heads);
      if (keys) {
        sm90::mbarrier_arrive_expect_tx(ring.q_full(), R::kQBytes);  // releases the slot's write
#pragma unroll
        for (int panel = 0; panel < D / 64; ++panel)
          sm90::tma_load_4d(ring.q() + panel * kTileQ * 128, &p.q, ring.q_full(), 64 * panel, w.q0, head, batch);
      }
      for (int j = 0; j < w.key_tiles; ++j) {
        std::uint64_t* full;
        std::uint8_t* dst;
        stage(pos + j, full, dst);
        sm90::mbarrier_arrive_expect_tx(full, R::kTileBytes);
#pragma unroll
        for (int panel = 0; panel < D / 64; ++panel)
          sm90::tma_load_4d(dst + panel * KT * 128, map, full, 64 * panel, (w.first + j) * KT, head, batch);
      }
    } else {
      if (keys) {
        if (lane == 0) sm90::mbarrier_arrive(ring.q_full());  // releases the slot's write (cp.async arrivals do not)
        const auto* q = static_cast<const std::uint16_t*>(a.q) + a.q_at.head_start(w.bh) + w.q0 * a.q_at.row;
        copy_tile_by_warp<kTileQ, D>(ring.q(), q, a.q_at.row, a.lq - w.q0, a.d, lane);
        sm90::cp_async_arrive(ring.q_full());
      }
      const auto* g = static_cast<const std::uint16_t*>(keys ? a.k : a.v) + at.head_start(w.bh);
      for (int j = 0; j < w.key_tiles; ++j) {
        std::uint64_t* full;
        std::uint8_t* dst;
        stage(pos + j, full, dst);
        const int k0 = (w.first + j) * KT;
        copy_tile_by_warp<KT, D>(dst, g + static_cast<long long>(k0) * at.row, at.row, a.lk - k0, a.d, lane);
        sm90::cp_async_arrive(full);
      }
    }
    pos += w.key_tiles;
  }
}

// Turns of the consumer warpgroups (ForwardArgs::pingpong, sm90::Turns on named barriers 1..3):
// each passes the same key_tiles + 1 issue points.
constexpr int kTurnBarrier = 1;

// One consumer warpgroup (wg 0 .. kConsumers - 1): its 64 query rows of each of the block's
// tiles through every key tile. Ring positions run on across tiles as in produce().
template <typename T, int D, int C, int KT, int DH, bool kWindow>
__device__ __forceinline__ void consume(const ForwardArgs& a, const Ring<D, C, KT>& ring, int tiles, int blocks,
                                        int wg) {
  using R = Ring<D, C, KT>;
  constexpr int kTileQ = R::kTileQ;
  const int thread = threadIdx.x % 128;
  const bool releases = thread % 32 == 0;  // one arrival per warp frees a stage
  const bool generic_fills = !a.tma;       // cp.async wrote through the generic proxy; wgmma reads through the async one
  const float scale_log2 = a.scale * kLog2e;
  auto wait_parity = [&](std::uint64_t* bar, int parity) {
    sm90::mbarrier_wait(bar, parity);
    if (generic_fills) sm90::fence_proxy_async();
  };
  auto wait_full = [&](std::uint64_t* bar, int pos) { wait_parity(bar, (pos / R::kStages) & 1); };
  auto release = [&](std::uint64_t* bar) {
    if (releases) sm90::mbarrier_arrive(bar);
  };
  // With two consumers (232 registers) the warpgroup's Q rows sit in registers as A fragments,
  // read once, and each S = Q K^T reads only K from shared memory (version 15; it measured
  // within the spread of version 14, so shared-memory reads were not what bound this kernel);
  // three consumers (160 registers) have no room for them and read Q from shared memory, nor
  // has a 176-key tile (its S and P take 88 + 44 registers where a 128-key tile's take 64 + 32).
  constexpr bool kQInRegisters = Shape<D, C>::kConsumers <= 2 && KT == fwd90::kTileK;
  std::uint32_t q[DH / 16][4];
  const std::uint32_t q_tile = smem_addr(ring.q());
  auto issue_scores = [&](float(&s)[KT / 2], std::uint32_t k_tile) {
    if constexpr (kQInRegisters)
      fwd90::issue_scores<T, DH>(s, q, k_tile);
    else
      fwd90::issue_scores<T, DH, kTileQ, KT>(s, q_tile, 64 * wg, k_tile);
  };

  const sm90::Turns turns{a.pingpong && C > 1, wg, kTurnBarrier, Shape<D, C>::kConsumers};
  turns.start();
  int pos = 0;
  for (int t = 0;; ++t) {
    wait_parity(ring.q_full(), t & 1);
    const int block = *ring.tile(t);  // published by the producer before Q's barrier completed
    if (block >= blocks) break;
    const Work w = work_of<D, C, KT, kWindow>(a, block, tiles);
    const fwd90::RowPlace at = fwd90::row_place(w.q0 + 64 * wg, thread);
    const int key_tiles = w.key_tiles;
    float o[DH / 2];
#pragma unroll
    for (int i = 0; i < DH / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];

    if constexpr (kQInRegisters) {
      sm90::load_a_fragments<kTileQ, DH>(q, ring.q(), 64 * wg + 16 * (thread / 32), (thread % 32) / 4, thread % 4);
      // The rows are in registers: the producer may load the next tile's Q. Its TMA write is an
      // async-proxy access after these generic reads, so the proxies are fenced first.
      sm90::fence_proxy_async();
      release(ring.q_empty());
    }
    if (kWindow && key_tiles == 0) {  // no row sees a key: zeros and L = +inf (no K or V was loaded)
      if (!kQInRegisters) release(ring.q_empty());
      fwd90::write_output<T, DH>(a, w.bh, at, o, m, l);
      continue;
    }
    const int s0 = pos % R::kStages;
    wait_full(ring.k_full(s0), pos);
    float s[KT / 2];
    turns.wait();
    sm90::wgmma_fence();
    issue_scores(s, smem_addr(ring.k(s0)));
    sm90::wgmma_commit();
    turns.pass(false);
    sm90::wgmma_wait<0>();
    sm90::pin(s);
    release(ring.k_empty(s0));
    if (!kQInRegisters && key_tiles == 1) release(ring.q_empty());  // the tile's last S has landed
    fwd90::mask_scores<kWindow, KT>(s, at, w.first, a.mask);
    softmax_step<KT>(s, m, l, alpha, scale_log2);  // O is still zero: nothing to rescale
    std::uint32_t p[KT / 16][4];
    sm90::to_a_fragments<T, KT>(p, s);

    for (int j = 1; j < key_tiles; ++j) {
      const int sk = (pos + j) % R::kStages, sv = (pos + j - 1) % R::kStages;
      wait_full(ring.k_full(sk), pos + j);
      wait_full(ring.v_full(sv), pos + j - 1);
      turns.wait();
      sm90::pin(o);
      sm90::wgmma_fence();
      issue_scores(s, smem_addr(ring.k(sk)));
      sm90::wgmma_commit();
      fwd90::issue_pv<T, DH, KT>(o, p, smem_addr(ring.v(sv)));
      sm90::wgmma_commit();
      turns.pass(false);

      sm90::wgmma_wait<1>();  // S_j has landed; P_{j-1} V_{j-1} may still run
      sm90::pin(s);
      release(ring.k_empty(sk));
      if (!kQInRegisters && j == key_tiles - 1) release(ring.q_empty());
      fwd90::mask_scores<kWindow, KT>(s, at, w.first + j, a.mask);
      softmax_step<KT>(s, m, l, alpha, scale_log2);
      sm90::wgmma_wait<0>();
      sm90::pin(o);
      sm90::pin(p);
      release(ring.v_empty(sv));
      rescale_rows<DH>(o, alpha);
      sm90::to_a_fragments<T, KT>(p, s);
    }

    const int last = (pos + key_tiles - 1) % R::kStages;
    wait_full(ring.v_full(last), pos + key_tiles - 1);
    turns.wait();
    sm90::pin(o);
    sm90::wgmma_fence();
    fwd90::issue_pv<T, DH, KT>(o, p, smem_addr(ring.v(last)));
    sm90::wgmma_commit();
    turns.pass(false);  // whether this was the block's last tile is known only at the next slot
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    release(ring.v_empty(last));  // the producer may be filling the other stages with the next tile
    fwd90::write_output<T, DH>(a, w.bh, at, o, m, l);
    pos += key_tiles;
  }
  turns.finish();
}

// setmaxnreg needs a register cap at entry (__launch_bounds__ with a minimum of blocks per SM)
// and each warpgroup's role in one branch of a single if / else.
template <typename T, int D, int C, int KT, int DH, bool kWindow>
__global__ void __launch_bounds__(Shape<D, C>::kThreads, Shape<D, C>::kBlocksPerSm)
    flash_forward_sm90_ws(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  using R = Ring<D, C, KT>;
  using S = Shape<D, C>;
  constexpr int kTileQ = S::kTileQ;
  const R ring(smem_raw);
  const ForwardArgs& a = p.a;
  const int tiles = (a.lq + kTileQ - 1) / kTileQ;
  const int blocks = tiles * a.bh;  // tiles of work; a persistent grid has fewer blocks than this

  if (threadIdx.x == 0) {
    const unsigned fills = a.tma ? 1 : 32;  // one arrive.expect_tx, or one cp.async arrival per lane
    // Q's: + one plain arrival after the tile slot's write without TMA; empty: + the V warp's.
    sm90::mbarrier_init(ring.q_full(), a.tma ? 1 : 33);
    sm90::mbarrier_init(ring.q_empty(), S::kConsumerWarps + 1);
    for (int s = 0; s < R::kStages; ++s) {
      sm90::mbarrier_init(ring.k_full(s), fills);
      sm90::mbarrier_init(ring.v_full(s), fills);
      sm90::mbarrier_init(ring.k_empty(s), S::kConsumerWarps);
      sm90::mbarrier_init(ring.v_empty(s), S::kConsumerWarps);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    sm90::setmaxnreg_dec<S::kProducerRegisters>();
    produce<D, C, KT, kWindow>(p, ring, tiles, blocks);
  } else {
    sm90::setmaxnreg_inc<S::kConsumerRegisters>();
    consume<T, D, C, KT, DH, kWindow>(a, ring, tiles, blocks, threadIdx.x / 128 - 1);
  }
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// kWindow: the instance built for sliding windows (mask.hpp).
template <bool kWindow, typename T, int D, int C, int KT, int DH = D>
void launch(const ForwardArgs& args, cudaStream_t stream) {
  constexpr int smem = Ring<D, C, KT>::bytes();
  constexpr int kTileQ = Shape<D, C>::kTileQ, kThreads = Shape<D, C>::kThreads;
  Params p{};
  p.a = args;
  p.a.tma = args.tma && encode_tensor_map(&p.q, args.q, args.q_at, args.bh, args.lq, args.d, args.dtype, kTileQ) &&
            encode_tensor_map(&p.k, args.k, args.k_at, args.bh, args.lk, args.d, args.dtype, KT) &&
            encode_tensor_map(&p.v, args.v, args.v_at, args.bh, args.lk, args.d, args.dtype, KT);
  const auto kernel = flash_forward_sm90_ws<T, D, C, KT, DH, kWindow>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  // Fixed for an instance on a device: asked once, not on every launch (small shapes are host-bound).
  static const int per_sm = [&] {
    int n = 1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem);
    return n;
  }();
  const int tiles = (args.lq + kTileQ - 1) / kTileQ;
  p.a.head_group = head_group_in_flight(args.bh, 2LL * args.lk * args.d * 2, args.head_group, tiles, args.mask.causal(),
                                        per_sm);  // K and V of a head
  const long long grid = persistent_grid(args.persistent, static_cast<long long>(tiles) * args.bh, per_sm,
                                         args.tile_counter, stream, &p.a.tile_counter);
  kernel<<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(p);
}

template <bool kWindow, typename T, int DH>
void launch_d128(const ForwardArgs& a, cudaStream_t stream) {
  if constexpr (!kWindow)  // a window is causal: it never takes the 176-key tiles
    if (!a.mask.causal()) return launch<false, T, 128, 2, 176, DH>(a, stream);
  return launch<kWindow, T, 128, 2, 128, DH>(a, stream);
}

// The block shape for kernel head dim D: at 64 the query rows per block (consumer warpgroups), at
// 128 the columns the MMAs run over (head dims 65..128 in the d 128 tiles: 80, 96 or 128).
template <bool kWindow, typename T, int D>
void launch_shape(const ForwardArgs& a, cudaStream_t stream) {
  if constexpr (D == 64) {
    static const int sms = multiprocessor_count();
    switch (d64_consumer_warpgroups(a.lq, a.bh, sms, a.query_tile, kWindow ? a.mask.window : 0)) {
      case 1: return launch<kWindow, T, 64, 1, 128>(a, stream);
      case 3: return launch<kWindow, T, 64, 3, 128>(a, stream);
      default: return launch<kWindow, T, 64, 2, 128>(a, stream);
    }
  } else {
    static_assert(D == 128, "the warp-specialized forward is built for kernel head dims 64 and 128");
    if (a.d <= 80) return launch_d128<kWindow, T, 80>(a, stream);
    if (a.d <= 96) return launch_d128<kWindow, T, 96>(a, stream);
    return launch_d128<kWindow, T, 128>(a, stream);
  }
}

}  // namespace

template <typename T, int D>
void forward_wgmma_ws(const ForwardArgs& a, cudaStream_t stream) {
  if (a.mask.windowed()) return launch_shape<true, T, D>(a, stream);
  launch_shape<false, T, D>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                      \
  template void forward_wgmma_ws<__half, D>(const ForwardArgs&, cudaStream_t);          \
  template void forward_wgmma_ws<__nv_bfloat16, D>(const ForwardArgs&, cudaStream_t);
RUNNER_FLASH_WGMMA_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
