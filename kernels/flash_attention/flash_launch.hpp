// Launchers of the flash-attention kernels (internal: flash_attention.cpp checks the
// inputs and calls these). Plain pointers, strides and kernels::DType, no LibTorch headers.
//
// Every q, k, v, out, dout, dq, dk, dv is a [batch, seq, heads, d] view described by a
// Layout (strides in elements, d contiguous), so a fused QKV projection's output and a
// [batch, seq, heads * d] result need no transposes. lse and delta are [batch * heads, seq]
// fp32, contiguous. `bh` counts batch * heads; head index h of batch b is bh = b * heads + h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/launch.hpp"
#include "mask.hpp"
#include "tile_scheduler.hpp"

namespace kernels::flash::detail {

// Element offsets of one [batch, seq, heads, d] view: row `s` of head `bh` starts at
// (bh / heads) * batch + (bh % heads) * head + s * row. A contiguous [bh, seq, d] tensor is
// {seq * d, 0, d, 1}.
struct Layout {
  long long batch = 0, head = 0, row = 0;
  int heads = 1;
  RUNNER_FLASH_HD long long head_start(long long bh) const { return (bh / heads) * batch + (bh % heads) * head; }
};

// A warp-specialized kernel's grid: one block per tile, persistent, or persistent where the tiles
// fill more than one wave (persistent_grid).
enum class Persistence { off, on, automatic };

struct ForwardArgs {
  const void *q, *k, *v;
  void* out;
  float* lse;  // [bh, lq], natural log of the row's softmax normaliser
  Layout q_at, k_at, v_at, out_at;
  int bh, lq, lk;
  int d;        // the head dim of the tensors
  int d_kernel; // the kernel's head dim (>= d; columns d.. are zero in shared memory)
  Mask mask;    // its lq and lk are the ones above
  DType dtype;
  float scale;
  bool wgmma = false;      // Hopper warpgroup-MMA kernels (flash_forward_sm90.cu) instead of mma.sync
  bool pipelined = true;   // wgmma only: softmax under the previous tile's P V (else serial)
  bool warp_specialized = false;  // wgmma only: producer warpgroup + mbarrier ring (flash_forward_sm90_ws.cu)
  bool tma = true;         // warp_specialized only: TMA loads (else cp.async by the producer)
  bool pingpong = true;    // warp_specialized only: the consumer warpgroups take turns issuing MMAs
  // warp_specialized only: the grid (persistent_grid) and its tile counter.
  Persistence persistent = Persistence::off;
  int* tile_counter = nullptr;
  int head_group = 0;      // heads per block-order group (tile_scheduler.hpp); 0 = sized to the L2
  // warp_specialized at kernel head dim 64: query rows per block, 64 (one consumer warpgroup, two
  // blocks per SM), 128 (two consumer warpgroups) or 192 (three); 0 = by the grid
  // (tile_scheduler.hpp, d64_consumer_warpgroups).
  int query_tile = 0;
};

struct BackwardArgs {
  const void *q, *k, *v, *dout;
  const float* lse;    // from forward
  const float* delta;  // [bh, lq] rowsum(out * dout) in fp32
  void *dq, *dk, *dv;
  Layout q_at, k_at, v_at, dout_at, dq_at, dk_at, dv_at;
  int bh, lq, lk, d, d_kernel;
  Mask mask;  // its lq and lk are the ones above
  DType dtype;
  float scale;
  bool wgmma = false;  // flash_backward_sm90.cu instead of flash_backward.cu
  int head_group = 0;
  // wgmma only: a zeroed fp32 [bh, lq, d_kernel] buffer selects the fused backward (dQ summed
  // with atomics); null selects the deterministic two-kernel one.
  float* dq_accum = nullptr;
  // fused only: the warp-specialized dK/dV/dQ kernel (flash_backward_sm90_ws.cu) where TMA
  // can read the layouts, else the fused one.
  bool warp_specialized = false;
  // warp-specialized only: each step's dQ tile is staged in shared memory and added into
  // dq_accum by a producer warp with cp.reduce.async.bulk (no atomics in the consumers);
  // dq_accum is then in the tiled layout of dq_tiled_offset, bh * ceil(lq / 64) * 64 rows.
  // A layout no tensor map describes runs the fused kernel, which re-zeroes the buffer and
  // uses the row-major layout (launch_backward_sm90 clears this flag for the conversion).
  bool bulk_dq = false;
  // warp-specialized only: the two consumer warpgroups take turns issuing their MMAs (S^T with
  // dP^T; dQ with dV and dK), so one's exponentials and dS^T run under the other's MMAs.
  bool pingpong = false;
  // warp-specialized only: the grid (persistent_grid; its tiles: 128 keys of a head) and its
  // tile counter.
  Persistence persistent = Persistence::off;
  int* tile_counter = nullptr;
  bool counter_zeroed = false;  // the delta pass zeroed tile_counter (no memset before the kernel)
  // The warp-specialized kernel and the dQ conversion launch as programmatic dependents of the
  // kernel before each (dependent_launch.cuh).
  bool dependent_launch = false;
};

// Where element (row, col) of head bh sits in the bulk-dQ backward's fp32 accumulator: one
// 64 x 64 chunk (16 KiB, what one cp.reduce.async.bulk adds) per 64-row query tile and 64
// columns, [bh][query tile][column panel][64 rows][64 columns]; inside a row the 8-column
// blocks are XOR-swizzled with row % 8, so the consumers' fragment stores into the shared
// copy of a chunk hit every bank equally. Eight columns from a multiple of 8 stay contiguous.
RUNNER_FLASH_HD int dq_chunk_index(int row, int col) {  // row, col < 64
  return row * 64 + (((col / 8) ^ (row % 8)) * 8) + col % 8;
}
RUNNER_FLASH_HD long long dq_tiled_offset(long long bh, int row, int col, int q_tiles, int d_kernel) {
  const long long chunk = (bh * q_tiles + row / 64) * (d_kernel / 64) + col / 64;
  return chunk * 4096 + dq_chunk_index(row % 64, col % 64);
}

// Heads per group of the kernels' block order (tile_scheduler.hpp) for operands of
// `bytes_per_head` streamed per head, sized to the current device's L2; `requested` > 0
// (the head_group option) wins, 1 = head after head.
inline int head_group(int bh, long long bytes_per_head, int requested) {
  int device = 0, l2 = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  return heads_per_group(bh, bytes_per_head, l2, requested);
}

// The same for a kernel launched as `tiles` blocks per head with `blocks_per_sm` resident on
// each SM: without a causal mask, no more heads than the blocks running at once cover
// (cap_to_heads_in_flight).
// SMs of the device this process uses.
inline int multiprocessor_count() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

// The warp-specialized kernels' grids: one block per tile (off), or persistent (on; automatic
// where the tiles fill more than one wave of resident blocks): as many blocks as fit on the GPU
// at once, each drawing its next tile from a counter (next_block, tile_scheduler.hpp).
// persistent_grid returns the grid for `blocks` tiles with `blocks_per_sm` resident on each SM.
// A grid of fewer blocks than tiles zeroes `counter` (one int) on `stream`, unless an earlier
// kernel did (counter_zeroed: the backward's delta pass), and hands it to the kernel in
// `*kernel_counter`; otherwise that is null and each block runs its one tile.
inline long long persistent_grid(Persistence choice, long long blocks, int blocks_per_sm, int* counter,
                                 cudaStream_t stream, int** kernel_counter, bool counter_zeroed = false) {
  static const int sms = multiprocessor_count();  // of the device this process uses, asked once
  const long long resident = static_cast<long long>(sms) * blocks_per_sm;
  const bool persistent =
      choice == Persistence::on || (choice == Persistence::automatic && blocks > resident);
  const long long grid = persistent && resident < blocks ? resident : blocks;
  *kernel_counter = nullptr;
  if (grid < blocks && counter != nullptr) {
    *kernel_counter = counter;
    if (!counter_zeroed) cudaMemsetAsync(counter, 0, sizeof(int), stream);
  }
  return grid;
}

inline int head_group_in_flight(int bh, long long bytes_per_head, int requested, int tiles, bool causal,
                                int blocks_per_sm) {
  return cap_to_heads_in_flight(head_group(bh, bytes_per_head, requested), tiles,
                                1LL * multiprocessor_count() * blocks_per_sm, causal, requested);
}

// rowsum(out * dout) in fp32 into delta [bh * lq]; zeroed (optional, fp32 [bh * lq,
// zeroed_cols]) is set to 0.
struct DeltaArgs {
  const void *out, *dout;
  Layout out_at, dout_at;
  float* delta;
  float* zeroed;
  int bh, lq, d, zeroed_cols;
  DType dtype;
  bool zeroed_tiled = false;  // zeroed is in dq_tiled_offset's layout (zeroed_cols = the kernel head dim)
  int* counter = nullptr;      // optional: one int set to 0 too (the backward's tile counter)
};
void launch_backward_delta(const DeltaArgs& a, cudaStream_t stream);

// The forward and backward of `a`: flash_dispatch.cu, the one switch over the kernel family (a.dtype
// fp32: CUDA cores; a.wgmma: Hopper warpgroup MMAs and their schedules; else mma.sync), the input
// type and the kernel head dim, which calls one of the launchers below.
// mma.sync (flash_forward.cu, flash_backward.cu) and fp32 (flash_fp32.cu) kernels take
// contiguous [bh, seq, d_kernel] tensors (the layouts are not read); the wgmma kernels take any layout.
void launch_forward(const ForwardArgs& a, cudaStream_t stream);
void launch_backward(const BackwardArgs& a, cudaStream_t stream);

// The kernel head dims each family is built for (16, 32, 64, 128: mma.sync and fp32; 64, 128:
// wgmma). flash_dispatch.cu's switches and the families' explicit instantiations both expand
// these lists, so a head dim is added in one place.
#define RUNNER_FLASH_MMA_SYNC_HEAD_DIMS(X) X(16) X(32) X(64) X(128)
#define RUNNER_FLASH_WGMMA_HEAD_DIMS(X) X(64) X(128)

// One family's launcher for input type T (__half or __nv_bfloat16) and kernel head dim D, defined
// and instantiated for the head dims flash_dispatch.cu names in each family's file.
// mma.sync, D 16, 32, 64, 128: flash_forward.cu, flash_backward.cu.
template <typename T, int D> void forward_mma_sync(const ForwardArgs& a, cudaStream_t stream);
template <typename T, int D> void backward_mma_sync(const BackwardArgs& a, cudaStream_t stream);
// fp32 inputs on CUDA cores (exact fp32 arithmetic), D 16, 32, 64, 128: flash_fp32.cu.
template <int D> void forward_fp32(const ForwardArgs& a, cudaStream_t stream);
template <int D> void backward_fp32(const BackwardArgs& a, cudaStream_t stream);
// Hopper warpgroup MMAs (sm_90a), D 64 and 128: the serial and pipelined forward
// (flash_forward_sm90.cu), the warp-specialized one (flash_forward_sm90_ws.cu) and the backward
// (flash_backward_sm90.cu), which runs the warp-specialized dK/dV/dQ kernel (flash_backward_sm90_ws.cu)
// where it applies: false (nothing launched) where a tensor map cannot describe a layout.
template <typename T, int D> void forward_wgmma(const ForwardArgs& a, cudaStream_t stream);
template <typename T, int D> void forward_wgmma_ws(const ForwardArgs& a, cudaStream_t stream);
template <typename T, int D> void backward_wgmma(const BackwardArgs& a, cudaStream_t stream);
template <typename T, int D> bool dkdv_wgmma_ws(const BackwardArgs& a, cudaStream_t stream);

}  // namespace kernels::flash::detail
