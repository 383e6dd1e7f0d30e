// Test-only launcher of wgmma_probe.cu (bf16 inputs, fp32 outputs, default stream).
#pragma once

namespace kernels::flash::detail {

// a [64 x d], b and v [n x d] row-major bf16; s [64 x n] = a b^T; o [64 x d] = bf16(s) v.
// mn_lbo / mn_sbo: the MN-major descriptor's byte offsets for v (-1: the kernels' values,
// n * 128 and 1024), so a failing layout can be diagnosed without a rebuild.
void wgmma_probe(int n, int d, const void* a, const void* b, const void* v, float* s, float* o, int mn_lbo = -1,
                 int mn_sbo = -1);

}  // namespace kernels::flash::detail
