// Masking a thread's accumulator fragment of the tensor-core kernels by a Mask (mask.hpp): the
// rule is there; this is where its elements sit in the fragment.
#pragma once
#include "mask.hpp"

namespace kernels::flash::detail {

// Sets element (row, col) of a thread's accumulator fragment to `fill` where is_hidden(row,
// col). Fragment layout (wgmma.cuh, mma.cuh): element 4i + 2r + c is row `row` + 8r, column
// col0 + 8i + 2t + c, for i < N / 8.
template <int N, typename Hidden>
__device__ __forceinline__ void mask_fragment(float (&s)[N / 2], int row, int col0, int t, float fill,
                                              Hidden is_hidden) {
#pragma unroll
  for (int i = 0; i < N / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (is_hidden(row + 8 * (e >> 1), col0 + 8 * i + 2 * t + (e & 1))) s[4 * i + e] = fill;
}

// The same for a fragment whose two rows (row, row + 8) each keep one range of columns,
// `keep[r]` (Mask::keys_seen): the rule is evaluated once a row, and an element costs two
// compares against limits made relative to the thread's first column.
template <int N>
__device__ __forceinline__ void mask_fragment_outside(float (&s)[N / 2], int col0, int t, float fill,
                                                      const TileRange (&keep)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int lo = keep[r].begin - col0 - 2 * t, hi = keep[r].end - col0 - 2 * t;
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        if (8 * i + c < lo || 8 * i + c >= hi) s[4 * i + 2 * r + c] = fill;
  }
}

}  // namespace kernels::flash::detail
