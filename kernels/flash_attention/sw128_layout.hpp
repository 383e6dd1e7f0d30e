// Byte arithmetic of the 128-byte-swizzled ("SW128") tiles the wgmma kernels use, shared by
// the kernels (wgmma.cuh) and a CPU test that checks it against the documented layouts
// (flash_attention_test.cpp, Sw128Layout). Plain C++: no CUDA needed to include it.
//
// A ROWS x D tile of 16-bit elements (D = 64 or 128) is stored as D/64 panels of ROWS x 64;
// each panel row is 128 bytes, and its 16-byte chunk c sits at chunk c ^ (row % 8). The
// hardware's view of the same bytes: a descriptor names a start address and two strides
// (LBO, SBO), the operand's canonical layout gives each element an unswizzled byte address,
// and address bits [4:6] are XORed with bits [7:9] (so tiles start 1024-byte aligned).
#pragma once

#if defined(__CUDACC__)
#define RUNNER_SW128_FN __host__ __device__ __forceinline__
#else
#define RUNNER_SW128_FN inline
#endif

namespace kernels::flash::detail::sw128 {

constexpr int kSbo = 1024;  // 8 rows of 128 bytes: the stride between 8-row groups

// Where the loader puts element (row, col) of a ROWS-row tile, in bytes from the tile start.
template <int ROWS>
RUNNER_SW128_FN int offset(int row, int col) {
  return (col / 64) * ROWS * 128 + row * 128 + ((((col % 64) / 8) ^ (row & 7)) << 4) + (col % 8) * 2;
}

// K-major operand (the contraction runs along the stored row): rows row0.. and contraction
// elements 16kk..16kk+15 start here; 16 elements = 32 bytes inside one panel row.
template <int ROWS>
RUNNER_SW128_FN int k_major_start(int row0, int kk) {
  return (kk / 4) * ROWS * 128 + row0 * 128 + (kk % 4) * 32;
}

// MN-major operand (the contraction runs down the rows): contraction rows 16kk..16kk+15
// start here; the next 64 output columns are one panel (LBO) further.
RUNNER_SW128_FN int mn_major_start(int kk) { return kk * 16 * 128; }
template <int ROWS>
constexpr int mn_major_lbo() {
  return ROWS * 128;
}

// The hardware's swizzle of an (unswizzled) byte address.
RUNNER_SW128_FN int swizzle(int addr) { return addr ^ (((addr >> 7) & 7) << 4); }

}  // namespace kernels::flash::detail::sw128
