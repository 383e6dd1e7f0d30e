// Which scores a query may not see, for the tensor-core kernels' accumulator fragments.
// Causal masks are top-left aligned (query i sees keys j <= i, as attention/naive); keys past
// the sequence end are hidden too. Only tiles that cross the diagonal or an end pay for it.
#pragma once

namespace kernels::flash::detail {

// Whether key `key` is hidden from query `query`.
__device__ __forceinline__ bool hidden(int query, int key, int lk, bool causal) {
  return key >= lk || (causal && key > query);
}

// Whether a tile of queries from `query0` (the tile's first row) against keys key0 ..
// key0 + keys - 1 holds any hidden score.
__device__ __forceinline__ bool tile_needs_mask(int query0, int key0, int keys, int lk, bool causal) {
  return key0 + keys > lk || (causal && key0 + keys - 1 > query0);
}

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
