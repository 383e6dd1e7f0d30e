// The online softmax of the forward kernels on accumulator fragments (mma.cuh's layout:
// element 4i + 2r + c is row r's column 8i + 2t + c, four lanes share a row). Scores are
// scaled by scale * log2(e) so every exponential is an exp2; m is kept in those units and L
// converted back to natural log at the end.
#pragma once
#include <cmath>

#include "mma.cuh"

namespace kernels::flash::detail {

// One online-softmax step over a tile of N keys: s becomes exp2(scale_log2 * s - m_new) in
// place; m and l (running max and this lane's share of the sum) move on; alpha is what older
// sums and outputs must be scaled by.
template <int N>
__device__ __forceinline__ void softmax_step(float (&s)[N / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < N / 8; ++i) tile_max = fmaxf(tile_max, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
    const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
    // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf.
    const float base = m_new == -INFINITY ? 0.f : m_new;
    alpha[r] = exp2f(m[r] - base);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      s[4 * i + 2 * r] = exp2f(s[4 * i + 2 * r] * scale_log2 - base);
      s[4 * i + 2 * r + 1] = exp2f(s[4 * i + 2 * r + 1] * scale_log2 - base);
      sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
}

// Output accumulators of D columns scaled row-wise (alpha[0] the first row, alpha[1] the second).
template <int D>
__device__ __forceinline__ void rescale_rows(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o[4 * i] *= alpha[0];
    o[4 * i + 1] *= alpha[0];
    o[4 * i + 2] *= alpha[1];
    o[4 * i + 3] *= alpha[1];
  }
}

// The end of the softmax for the thread's two rows: 1 / sum (0 for a row that saw no key)
// and L = m / log2(e) + ln(sum) (+inf for such a row).
struct RowFinish {
  float inv[2], lse[2];
};
__device__ __forceinline__ RowFinish finish_rows(const float (&m)[2], const float (&l)[2]) {
  RowFinish f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    f.inv[r] = total > 0.f ? 1.f / total : 0.f;
    f.lse[r] = total > 0.f ? m[r] / kLog2e + logf(total) : INFINITY;
  }
  return f;
}

}  // namespace kernels::flash::detail
