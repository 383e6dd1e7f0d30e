// FlashAttention-2 forward on Hopper warpgroup MMAs (wgmma; fp16 / bf16, fp32 accumulation).
//
// Computes what flash_forward.cu computes, O = softmax(scale * Q K^T + mask) V and the row
// log-sum-exp L, on sm_90a GPUs, for kernel head dims 64 and 128; head dims 80 and 96 run the
// 128 kernel with columns d.. zero in shared memory (loaded as zeros, never stored).
// Inputs and output are strided [batch, seq, heads, d] views (flash_launch.hpp, Layout).
// FLOPs: 4 * bh * lq * lk * d, halved when causal. Bytes from HBM: Q, O once, K and V once
// per 128-query tile (mostly from L2).
// Grid: one block of two warpgroups (256 threads) per (128-query tile, batch*head), last
// tiles first over a group of heads (tile_scheduler.hpp). Each warpgroup owns 64 query rows;
// per 128-key tile it issues S = Q K^T as D/16 asynchronous m64n128k16 wgmmas with both
// operands in shared memory, runs the online softmax (softmax.cuh) on the fp32 accumulators
// in registers, and issues O += P V with P from registers (rounded to the input type) and V
// from shared memory. One MMA covers 64 rows, so each K or V byte read from shared memory
// feeds 4x the work of a 16-row mma.sync.
// Two schedules (option forward_schedule, ForwardArgs::pipelined):
//  * serial: S_j, wait, softmax_j, P_j V_j, wait. The tensor cores idle during softmax
//    except for what the other warpgroup issues.
//  * pipelined (FlashAttention-3's intra-warpgroup overlap): S_j and P_{j-1} V_{j-1} are
//    issued together; softmax_j runs while P_{j-1} V_{j-1} is still on the tensor cores, and
//    O is rescaled once that product has landed. Costs S, P and O live at once (more registers).
// The third schedule, warp-specialized (a TMA producer warpgroup and two consumers), is
// flash_forward_sm90_ws.cu; both share forward_sm90.cuh.
// K and V tiles come in with cp.async into two-stage rings (the next tile loads while this
// one is used), stored in the 128-byte swizzled layout the descriptors name.
// Shared memory at d = 128: Q 32 KiB + 2 x (K 32 + V 32) = 160 KiB, one block per SM.
// Causal: key tiles past the query tile's last row are skipped; tiles straddling the
// diagonal or the sequence end are masked per warpgroup (mask.cuh). A sliding window skips the
// key tiles before the tile's first row's window too; a tile whose rows see no key at all
// (queries past the keys and their window) writes zeros and L = +inf without loading any.
// Measured speed and what limits it: README.md, version log.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "forward_sm90.cuh"

namespace kernels::flash::detail {
namespace {

using fwd90::kTileK;
using fwd90::kTileQ;

constexpr int kThreads = 256;  // two warpgroups

template <int D>
constexpr int shared_bytes() {
  return (kTileQ + 4 * kTileK) * D * 2 + 1024;  // + alignment slack for the 1024-byte tile base
}

// What both schedules share: shared-memory carving, indices, tile loads, the mask, the two
// MMAs and the epilogue. The arguments stay in the kernel's parameter space (a.*). kWindow:
// built for sliding windows (mask.hpp); without it the key tiles start at 0 and none is empty.
template <typename T, int D, bool kWindow>
struct Block {
  static constexpr int kQBytes = kTileQ * D * 2, kKBytes = kTileK * D * 2;
  const ForwardArgs& a;
  std::uint8_t* sQ;
  const std::uint16_t *kg, *vg;  // this head's first key row
  int q0, tid, wg;
  int first, key_tiles;  // key tiles first .. first + key_tiles - 1 (mask.hpp)
  fwd90::RowPlace at;
  long bh;
  float scale_log2;

  __device__ Block(std::uint8_t* smem_raw, const ForwardArgs& args)
      : a(args), sQ(sm90::align_1024(smem_raw)), scale_log2(args.scale * kLog2e) {
    const int tiles = (a.lq + kTileQ - 1) / kTileQ;
    const TileSlot slot = tile_slot(blockIdx.x, tiles, gridDim.x / tiles, a.head_group);
    q0 = (tiles - 1 - slot.rank) * kTileQ;  // last tiles first: under a causal mask they are the longest
    bh = slot.head;
    tid = threadIdx.x;
    wg = tid / 128;
    at = fwd90::row_place(q0 + 64 * wg, tid % 128);
    kg = static_cast<const std::uint16_t*>(a.k) + a.k_at.head_start(bh);
    vg = static_cast<const std::uint16_t*>(a.v) + a.v_at.head_start(bh);
    const TileRange keys = a.mask.key_tiles<kWindow>(q0, kTileQ, kTileK);
    first = keys.begin;               // 0 without a window
    key_tiles = keys.count<kWindow>();  // >= 1 without a window: every row sees key 0
  }
  __device__ std::uint8_t* sK(int stage) const { return sQ + kQBytes + stage * 2 * kKBytes; }
  __device__ std::uint8_t* sV(int stage) const { return sQ + kQBytes + stage * 2 * kKBytes + kKBytes; }
  __device__ void load_q() const {
    const auto* q = static_cast<const std::uint16_t*>(a.q) + a.q_at.head_start(bh) + q0 * a.q_at.row;
    sm90::load_tile_sw128<kTileQ, D, kThreads>(sQ, q, a.q_at.row, a.lq - q0, a.d, tid);
  }
  // Key tile first + j (the j-th of the block's range).
  __device__ void load_k(int stage, int j) const {
    const int k0 = (first + j) * kTileK;
    sm90::load_tile_sw128<kTileK, D, kThreads>(sK(stage), kg + k0 * a.k_at.row, a.k_at.row, a.lk - k0, a.d, tid);
  }
  __device__ void load_v(int stage, int j) const {
    const int k0 = (first + j) * kTileK;
    sm90::load_tile_sw128<kTileK, D, kThreads>(sV(stage), vg + k0 * a.v_at.row, a.v_at.row, a.lk - k0, a.d, tid);
  }
  __device__ void mask(float (&s)[kTileK / 2], int j) const {
    fwd90::mask_scores<kWindow>(s, at, first + j, a.mask);
  }
  __device__ void issue_scores(float (&s)[kTileK / 2], int stage) const {
    fwd90::issue_scores<T, D>(s, smem_addr(sQ), 64 * wg, smem_addr(sK(stage)));
  }
  __device__ void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[kTileK / 16][4], int stage) const {
    fwd90::issue_pv<T, D>(o, p, smem_addr(sV(stage)));
  }
  __device__ void write_output(const float (&o)[D / 2], const float (&m)[2], const float (&l)[2]) const {
    fwd90::write_output<T, D>(a, bh, at, o, m, l);
  }
  // Rows that see no key (key_tiles == 0, the whole block alike): zeros and L = +inf.
  __device__ void write_empty() const {
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    const float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    write_output(o, m, l);
  }
};

__device__ __forceinline__ void shared_ready() {
  sm90::fence_proxy_async();  // cp.async wrote through the generic proxy; wgmma reads through the async one
  __syncthreads();
}

template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kThreads, 1) flash_forward_sm90_serial(const __grid_constant__ ForwardArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  const Block<T, D, kWindow> b(smem_raw, a);
  const int key_tiles = b.key_tiles;
  if (kWindow && key_tiles == 0) return b.write_empty();

  b.load_q();
  b.load_k(0, 0);
  b.load_v(0, 0);
  cp_async_commit();
  if (key_tiles > 1) {
    b.load_k(1, 1);
    b.load_v(1, 1);
    cp_async_commit();
  }

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int kt = 0; kt < key_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < key_tiles) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    shared_ready();

    float s[kTileK / 2];
    sm90::wgmma_fence();
    b.issue_scores(s, stage);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::pin(s);

    b.mask(s, kt);
    float alpha[2];
    softmax_step<kTileK>(s, m, l, alpha, b.scale_log2);
    rescale_rows<D>(o, alpha);
    std::uint32_t p[kTileK / 16][4];
    sm90::to_a_fragments<T, kTileK>(p, s);

    sm90::pin(o);
    sm90::wgmma_fence();
    b.issue_pv(o, p, stage);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    sm90::pin(p);

    __syncthreads();  // both warpgroups are done with this stage
    if (kt + 2 < key_tiles) {
      b.load_k(stage, kt + 2);
      b.load_v(stage, kt + 2);
      cp_async_commit();
    }
  }
  b.write_output(o, m, l);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// K ring: K_j in stage j % 2; V ring: V_j in stage j % 2. At the top of iteration j, K_j and
// V_{j-1} have landed (they were issued at the top of j - 1), and K_{j+1} and V_j are issued
// into the stages K_{j-1} and V_{j-2} left (both consumed and waited for in iteration j - 1).
template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kThreads, 1) flash_forward_sm90_pipelined(const __grid_constant__ ForwardArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  const Block<T, D, kWindow> b(smem_raw, a);
  const int key_tiles = b.key_tiles;
  if (kWindow && key_tiles == 0) return b.write_empty();

  b.load_q();
  b.load_k(0, 0);
  b.load_v(0, 0);
  if (key_tiles > 1) b.load_k(1, 1);
  cp_async_commit();
  sm90::cp_async_wait<0>();
  shared_ready();

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];

  float s[kTileK / 2];
  sm90::wgmma_fence();
  b.issue_scores(s, 0);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::pin(s);
  b.mask(s, 0);
  softmax_step<kTileK>(s, m, l, alpha, b.scale_log2);  // O is still zero: nothing to rescale
  std::uint32_t p[kTileK / 16][4];
  sm90::to_a_fragments<T, kTileK>(p, s);

  for (int kt = 1; kt < key_tiles; ++kt) {
    sm90::cp_async_wait<0>();
    shared_ready();  // K_kt and V_{kt-1} are in; every warpgroup finished iteration kt - 1
    if (kt + 1 < key_tiles) b.load_k((kt + 1) & 1, kt + 1);
    b.load_v(kt & 1, kt);
    cp_async_commit();

    sm90::pin(o);
    sm90::wgmma_fence();
    b.issue_scores(s, kt & 1);
    sm90::wgmma_commit();
    b.issue_pv(o, p, (kt - 1) & 1);
    sm90::wgmma_commit();

    sm90::wgmma_wait<1>();  // S_kt has landed; P_{kt-1} V_{kt-1} may still run
    sm90::pin(s);
    b.mask(s, kt);
    softmax_step<kTileK>(s, m, l, alpha, b.scale_log2);
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    sm90::pin(p);
    rescale_rows<D>(o, alpha);
    sm90::to_a_fragments<T, kTileK>(p, s);
  }

  sm90::cp_async_wait<0>();
  shared_ready();  // V of the last tile is in
  sm90::pin(o);
  sm90::wgmma_fence();
  b.issue_pv(o, p, (key_tiles - 1) & 1);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::pin(o);
  b.write_output(o, m, l);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

template <typename T, int D, bool kWindow>
void launch(const ForwardArgs& args, cudaStream_t stream) {
  constexpr int smem = shared_bytes<D>();
  const auto kernel =
      args.pipelined ? flash_forward_sm90_pipelined<T, D, kWindow> : flash_forward_sm90_serial<T, D, kWindow>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int tiles = (args.lq + kTileQ - 1) / kTileQ;
  ForwardArgs a = args;
  a.head_group = head_group(a.bh, 2LL * a.lk * a.d * 2, args.head_group);  // K and V of a head
  kernel<<<tiles * a.bh, kThreads, smem, stream>>>(a);
}

}  // namespace

template <typename T, int D>
void forward_wgmma(const ForwardArgs& a, cudaStream_t stream) {
  if (a.mask.windowed()) return launch<T, D, true>(a, stream);
  launch<T, D, false>(a, stream);
}
#define RUNNER_FLASH_INSTANTIATE(D)                                                   \
  template void forward_wgmma<__half, D>(const ForwardArgs&, cudaStream_t);          \
  template void forward_wgmma<__nv_bfloat16, D>(const ForwardArgs&, cudaStream_t);
RUNNER_FLASH_WGMMA_HEAD_DIMS(RUNNER_FLASH_INSTANTIATE)
#undef RUNNER_FLASH_INSTANTIATE

}  // namespace kernels::flash::detail
