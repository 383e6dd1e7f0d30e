// Masking a thread's accumulator fragment of the tensor-core kernels (wgmma and mma_sync) by a Mask
// (mask.hpp): the rule is there; this is where its elements sit in the fragment.
#pragma once
#include "mask.hpp"

namespace kernels::flash::detail {

// What a fragment's rows are: queries (S, columns keys) or keys (the backward's S^T, columns
// queries).
enum class FragmentRows { queries, keys };

// Sets to `fill` the elements of a thread's accumulator fragment that `mask` hides. Fragment
// layout (wgmma.cuh, mma.cuh): element 4i + 2r + c is row `row` + 8r, column col0 + 8i + 2t + c,
// for i < N / 8. Each of the two rows keeps one range of columns (Mask::keys_seen, or
// queries_seeing where rows are keys: FlashAttention-3's column limits), made relative to the
// thread's first column, so an element costs two compares; testing the rule per element made the
// masked tiles of a short sliding window ALU-bound (Nsight Compute: the ALU pipe the busiest, not
// the tensor cores).
template <int N, bool kWindow, FragmentRows kRows = FragmentRows::queries>
__device__ __forceinline__ void mask_fragment(float (&s)[N / 2], const Mask& mask, int row, int col0, int t,
                                              float fill) {
  const auto range = [&](int r) {
    return kRows == FragmentRows::keys ? mask.queries_seeing<kWindow>(r) : mask.keys_seen<kWindow>(r);
  };
  const TileRange keep[2] = {range(row), range(row + 8)};
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
// The mma_sync kernels hold the same fragment as [N / 8][4] (mma.cuh): element [i][2r + c].
template <int N, bool kWindow, FragmentRows kRows = FragmentRows::queries>
__device__ __forceinline__ void mask_fragment(float (&s)[N / 8][4], const Mask& mask, int row, int col0, int t,
                                              float fill) {
  mask_fragment<N, kWindow, kRows>(reinterpret_cast<float(&)[N / 2]>(s), mask, row, col0, t, fill);
}

}  // namespace kernels::flash::detail
