// FlashAttention-2 forward on Hopper warpgroup MMAs (wgmma; fp16 / bf16, fp32 accumulation).
//
// Computes what flash_forward.cu computes, O = softmax(scale * Q K^T + mask) V and the row
// log-sum-exp L, for head dims 64 and 128 on sm_90a GPUs.
// FLOPs: 4 * bh * lq * lk * d, halved when causal. Bytes from HBM: Q, O once, K and V once
// per 128-query tile (mostly from L2).
// Grid: one block of two warpgroups (256 threads) per (128-query tile, batch*head), last
// tiles first over a group of heads (tile_order.hpp). Each warpgroup owns 64 query rows; per 128-key tile it issues
// S = Q K^T as D/16 asynchronous m64n128k16 wgmmas with both operands in shared memory,
// runs the online softmax on the fp32 accumulators in registers, and issues O += P V with
// P from registers (rounded to the input type) and V from shared memory. One MMA covers 64
// rows, so each K or V byte read from shared memory feeds 4x the work of a 16-row mma.sync.
// Two schedules (RUNNER_FLASH_WGMMA_FORWARD=serial|pipelined, default pipelined):
//  * serial: S_j, wait, softmax_j, P_j V_j, wait. The tensor cores idle during softmax
//    except for what the other warpgroup issues.
//  * pipelined (FlashAttention-3's intra-warpgroup overlap): S_j and P_{j-1} V_{j-1} are
//    issued together; softmax_j runs while P_{j-1} V_{j-1} is still on the tensor cores, and
//    O is rescaled once that product has landed. Costs S, P and O live at once (more registers).
// K and V tiles come in with cp.async into two-stage rings (the next tile loads while this
// one is used), stored in the 128-byte swizzled layout the descriptors name.
// Shared memory at d = 128: Q 32 KiB + 2 x (K 32 + V 32) = 160 KiB, one block per SM.
// Causal: key tiles past the query tile's last row are skipped; tiles straddling the
// diagonal or the sequence end are masked per warpgroup.
// Measured (H100, bf16, causal, batch 1, 16 heads, d = 128; reports/data/flash_benchmarking,
// 2026-11-25): 362 TFLOP/s at seq 4096, 443 at 16384 (SDPA in the same run: 374, 560); as
// device time (part perf_bar_device) 389 and 438. The unrolled tile loads (mma.cuh) took it
// from 267 / 347 to 341 / 396 side by side (4096 / 16384, one call). The block order
// took 4096 from 220 to 271 in one call (the old order ran the last head's longest tiles
// alone at the end). Serial and pipelined within 2 %. Nsight Compute at 4096 after the
// unrolled loads: 228 registers, one block (8 warps) per SM, no eligible warp in 67 % of
// cycles; a quarter of the stall samples wait on the kernel's own wgmma groups: the two
// warpgroups issue together and each waits for both, so softmax time is MMA idle time.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "flash_kernels.hpp"
#include "wgmma.cuh"

namespace kernels::flash::detail {
namespace {

using sm90::Wgmma;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kTileQ = 128;    // 64 rows per warpgroup
constexpr int kTileK = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int shared_bytes() {
  return (kTileQ + 4 * kTileK) * D * 2 + 1024;  // + alignment slack for the 1024-byte tile base
}

// Scores of keys k0.. that a row may not see (past lk, or past the row when causal) -> -inf.
// row: the thread's first row (its second is 8 further); only tiles that need it pay.
__device__ __forceinline__ void mask_scores(float (&s)[kTileK / 2], int k0, int lk, int wg_row0, int row, int t,
                                            bool causal) {
  if (k0 + kTileK <= lk && !(causal && k0 + kTileK - 1 > wg_row0)) return;
#pragma unroll
  for (int i = 0; i < kTileK / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = k0 + 8 * i + 2 * t + (e & 1);
      if (col >= lk || (causal && col > row + 8 * (e >> 1))) s[4 * i + e] = -INFINITY;
    }
}

// One online-softmax step: s becomes exp2(scale*log2e*s - m_new) in place; m and l (running
// max and this lane's share of the sum) move on; alpha is what older sums must be scaled by.
__device__ __forceinline__ void softmax_step(float (&s)[kTileK / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kTileK / 8; ++i) tile_max = fmaxf(tile_max, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
    const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
    // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf.
    const float base = m_new == -INFINITY ? 0.f : m_new;
    alpha[r] = exp2f(m[r] - base);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kTileK / 8; ++i) {
      s[4 * i + 2 * r] = exp2f(s[4 * i + 2 * r] * scale_log2 - base);
      s[4 * i + 2 * r + 1] = exp2f(s[4 * i + 2 * r + 1] * scale_log2 - base);
      sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
}

template <int D>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o[4 * i] *= alpha[0];
    o[4 * i + 1] *= alpha[0];
    o[4 * i + 2] *= alpha[1];
    o[4 * i + 3] *= alpha[1];
  }
}

// O / l in the input type, and L = m / log2(e) + ln(l), for the thread's rows row and row + 8.
template <typename T, int D>
__device__ __forceinline__ void write_output(const float (&o)[D / 2], const float (&m)[2], const float (&l)[2],
                                             std::uint16_t* out, float* lse, long bh, int lq, int row, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    const float inv = total > 0.f ? 1.f / total : 0.f;
    if (row + 8 * r < lq) {
      std::uint16_t* orow = out + (bh * lq + row + 8 * r) * D;
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<std::uint32_t*>(orow + 8 * i + 2 * t) =
            pack2<T>(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
      if (t == 0) lse[bh * lq + row + 8 * r] = total > 0.f ? m[r] / kLog2e + logf(total) : INFINITY;
    }
  }
}

// What both schedules share: shared-memory carving, indices, tile loads and the two MMAs.
template <typename T, int D>
struct Block {
  static constexpr int kQBytes = kTileQ * D * 2, kKBytes = kTileK * D * 2;
  std::uint8_t* sQ;
  const std::uint16_t *kg, *vg;
  int q0, lk, tid, wg, wg_row0, row, t, key_tiles;
  long bh;
  float scale_log2;

  __device__ Block(std::uint8_t* smem_raw, const std::uint16_t* k, const std::uint16_t* v, int lq, int lk_,
                   bool causal, float scale, int head_group)
      : sQ(sm90::align_1024(smem_raw)), lk(lk_), scale_log2(scale * kLog2e) {
    const int tiles = (lq + kTileQ - 1) / kTileQ;
    const TileSlot slot = tile_slot(blockIdx.x, tiles, gridDim.x / tiles, head_group);
    q0 = (tiles - 1 - slot.rank) * kTileQ;  // last tiles first: under a causal mask they are the longest
    bh = slot.head;
    tid = threadIdx.x;
    wg = tid / 128;
    const int warp = (tid % 128) / 32, lane = tid % 32;
    t = lane % 4;
    wg_row0 = q0 + 64 * wg;
    row = wg_row0 + 16 * warp + lane / 4;
    kg = k + bh * lk * D;
    vg = v + bh * lk * D;
    const int key_end = causal ? min(lk, q0 + kTileQ) : lk;
    key_tiles = (key_end + kTileK - 1) / kTileK;  // >= 1: every row sees key 0
  }
  __device__ std::uint8_t* sK(int stage) const { return sQ + kQBytes + stage * 2 * kKBytes; }
  __device__ std::uint8_t* sV(int stage) const { return sQ + kQBytes + stage * 2 * kKBytes + kKBytes; }
  __device__ void load_q(const std::uint16_t* q, int lq) const {
    sm90::load_tile_sw128<kTileQ, D, kThreads>(sQ, q + (bh * lq + q0) * D, lq - q0, tid);
  }
  __device__ void load_k(int stage, int tile) const {
    sm90::load_tile_sw128<kTileK, D, kThreads>(sK(stage), kg + static_cast<long>(tile) * kTileK * D,
                                               lk - tile * kTileK, tid);
  }
  __device__ void load_v(int stage, int tile) const {
    sm90::load_tile_sw128<kTileK, D, kThreads>(sV(stage), vg + static_cast<long>(tile) * kTileK * D,
                                               lk - tile * kTileK, tid);
  }
  // S = Q K^T for this warpgroup's rows (issued, not waited for).
  __device__ void issue_scores(float (&s)[kTileK / 2], int stage) const {
    const std::uint32_t q_addr = smem_addr(sQ), k_addr = smem_addr(sK(stage));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kTileK>::ss(s, sm90::k_major<kTileQ>(q_addr, 64 * wg, kk), sm90::k_major<kTileK>(k_addr, 0, kk),
                           kk > 0);
  }
  // O += P V (issued, not waited for).
  __device__ void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[kTileK / 16][4], int stage) const {
    const std::uint32_t v_addr = smem_addr(sV(stage));
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) Wgmma<T, D>::rs_mn(o, p[kk], sm90::mn_major<kTileK>(v_addr, kk), 1);
  }
};

__device__ __forceinline__ void shared_ready() {
  sm90::fence_proxy_async();  // cp.async wrote through the generic proxy; wgmma reads through the async one
  __syncthreads();
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_sm90_serial(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                              const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ out,
                              float* __restrict__ lse, int lq, int lk, float scale, bool causal,
                              int head_group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  const Block<T, D> b(smem_raw, k, v, lq, lk, causal, scale, head_group);
  const int key_tiles = b.key_tiles;

  b.load_q(q, lq);
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

    mask_scores(s, kt * kTileK, lk, b.wg_row0, b.row, b.t, causal);
    float alpha[2];
    softmax_step(s, m, l, alpha, b.scale_log2);
    rescale<D>(o, alpha);
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
  write_output<T, D>(o, m, l, out, lse, b.bh, lq, b.row, b.t);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// K ring: K_j in stage j % 2; V ring: V_j in stage j % 2. At the top of iteration j, K_j and
// V_{j-1} have landed (they were issued at the top of j - 1), and K_{j+1} and V_j are issued
// into the stages K_{j-1} and V_{j-2} left (both consumed and waited for in iteration j - 1).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_sm90_pipelined(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                                 const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ out,
                                 float* __restrict__ lse, int lq, int lk, float scale, bool causal,
                                 int head_group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  const Block<T, D> b(smem_raw, k, v, lq, lk, causal, scale, head_group);
  const int key_tiles = b.key_tiles;

  b.load_q(q, lq);
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
  mask_scores(s, 0, lk, b.wg_row0, b.row, b.t, causal);
  softmax_step(s, m, l, alpha, b.scale_log2);  // O is still zero: nothing to rescale
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
    mask_scores(s, kt * kTileK, lk, b.wg_row0, b.row, b.t, causal);
    softmax_step(s, m, l, alpha, b.scale_log2);
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    sm90::pin(p);
    rescale<D>(o, alpha);
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
  write_output<T, D>(o, m, l, out, lse, b.bh, lq, b.row, b.t);
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

using Kernel = void (*)(const std::uint16_t*, const std::uint16_t*, const std::uint16_t*, std::uint16_t*, float*, int,
                        int, float, bool, int);

bool pipelined_schedule() { return env_choice("RUNNER_FLASH_WGMMA_FORWARD", "pipelined", "serial"); }

template <typename T, int D>
void launch(const ForwardArgs& a, cudaStream_t stream) {
  constexpr int smem = shared_bytes<D>();
  const Kernel kernel = pipelined_schedule() ? flash_forward_sm90_pipelined<T, D> : flash_forward_sm90_serial<T, D>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int tiles = (a.lq + kTileQ - 1) / kTileQ;
  const int group = head_group(a.bh, 2LL * a.lk * D * 2);  // K and V of a head
  kernel<<<tiles * a.bh, kThreads, smem, stream>>>(static_cast<const std::uint16_t*>(a.q),
                                                   static_cast<const std::uint16_t*>(a.k),
                                                   static_cast<const std::uint16_t*>(a.v),
                                                   static_cast<std::uint16_t*>(a.out), a.lse, a.lq, a.lk, a.scale,
                                                   a.causal, group);
}

template <typename T>
void launch_head_dim(const ForwardArgs& a, cudaStream_t stream) {
  switch (a.d) {
    case 64: return launch<T, 64>(a, stream);
    case 128: return launch<T, 128>(a, stream);
    default: throw std::invalid_argument("flash forward (wgmma): head dim " + std::to_string(a.d) + " not compiled");
  }
}

}  // namespace

void launch_forward_sm90(const ForwardArgs& a, cudaStream_t stream) {
  if (a.dtype == Dtype::fp16) return launch_head_dim<__half>(a, stream);
  if (a.dtype == Dtype::bf16) return launch_head_dim<__nv_bfloat16>(a, stream);
  throw std::invalid_argument("flash forward (wgmma): fp32 inputs take the CUDA-core kernels");
}

}  // namespace kernels::flash::detail
