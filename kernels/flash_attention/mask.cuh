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

}  // namespace kernels::flash::detail
