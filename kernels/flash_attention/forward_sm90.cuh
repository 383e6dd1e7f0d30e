// What the wgmma forward kernels share (flash_forward_sm90.cu: serial and pipelined;
// flash_forward_sm90_ws.cu: warp-specialized): the tile sizes, the two MMAs of one 64-row
// warpgroup, the mask of one score tile and the epilogue. Tiles are SW128 (wgmma.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "epilogue.cuh"
#include "flash_launch.hpp"
#include "mask.cuh"
#include "softmax.cuh"
#include "wgmma.cuh"

namespace kernels::flash::detail::fwd90 {

constexpr int kTileQ = 128;  // two warpgroups of 64 rows (the warp-specialized kernel: Shape<D>)
constexpr int kTileK = 128;  // key rows per tile (the warp-specialized kernel: KT, 176 at D = 128 not causal)

// S = Q K^T for the warpgroup's 64 rows starting at row0 of a TILE_Q-row Q tile (issued, not
// waited for).
template <typename T, int D, int TILE_Q = kTileQ, int KT = kTileK>
__device__ __forceinline__ void issue_scores(float (&s)[KT / 2], std::uint32_t q_tile, int row0, std::uint32_t k_tile) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    sm90::Wgmma<T, KT>::ss(s, sm90::k_major<TILE_Q>(q_tile, row0, kk), sm90::k_major<KT>(k_tile, 0, kk), kk > 0);
}

// The same with the warpgroup's Q rows as A fragments in registers (sm90::load_a_fragments):
// only K is read from shared memory.
template <typename T, int D>
__device__ __forceinline__ void issue_scores(float (&s)[kTileK / 2], const std::uint32_t (&q)[D / 16][4],
                                             std::uint32_t k_tile) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    sm90::Wgmma<T, kTileK>::rs(s, q[kk], sm90::k_major<kTileK>(k_tile, 0, kk), kk > 0);
}

// O += P V (issued, not waited for).
template <typename T, int D, int KT = kTileK>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const std::uint32_t (&p)[KT / 16][4],
                                         std::uint32_t v_tile) {
#pragma unroll
  for (int kk = 0; kk < KT / 16; ++kk) sm90::Wgmma<T, D>::rs_mn(o, p[kk], sm90::mn_major<KT>(v_tile, kk), 1);
}

// Where a thread's accumulator rows sit: the warpgroup's first row, the thread's row (and
// row + 8) and its column pair index t.
struct RowPlace {
  int wg_row0, row, t;
};
__device__ __forceinline__ RowPlace row_place(int wg_row0, int thread_in_wg) {
  const int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  return {wg_row0, wg_row0 + 16 * warp + lane / 4, lane % 4};
}

// Scores the warpgroup's rows may not see in key tile `tile` -> -inf (tiles that need it only).
// kWindow: the kernels built for sliding windows (mask.hpp); without it none and causal.
template <bool kWindow, int KT = kTileK>
__device__ __forceinline__ void mask_scores(float (&s)[KT / 2], const RowPlace& at, int tile, const Mask& mask) {
  const int k0 = tile * KT;
  if (mask.needs_mask<kWindow>(at.wg_row0, 64, k0, KT)) {
    mask_fragment<KT, kWindow>(s, mask, at.row, k0, at.t, -INFINITY);
  }
}

// O / l in the input type, and L, for the thread's rows.
template <typename T, int D>
__device__ __forceinline__ void write_output(const ForwardArgs& a, long bh, const RowPlace& at,
                                             const float (&o)[D / 2], const float (&m)[2], const float (&l)[2]) {
  const RowFinish f = finish_rows(m, l);
  auto* out = static_cast<std::uint16_t*>(a.out) + a.out_at.head_start(bh);
  store_rows<T, D>(o, out, a.out_at.row, at.row, a.lq, a.d, at.t, f.inv);
  if (at.t == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (at.row + 8 * r < a.lq) a.lse[bh * a.lq + at.row + 8 * r] = f.lse[r];
}

}  // namespace kernels::flash::detail::fwd90
