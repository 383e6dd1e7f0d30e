// Test-only launcher of wgmma_probe.cu (bf16 inputs, fp32 outputs, default stream).
#pragma once

namespace kernels::flash::detail {

// a [64 x d], b and v [n x d] row-major bf16; s [64 x n] = a b^T; o [64 x d] = bf16(s) v.
void wgmma_probe(int n, int d, const void* a, const void* b, const void* v, float* s, float* o);

}  // namespace kernels::flash::detail
