// Stores of the tensor-core kernels' fp32 accumulator fragments (mma.cuh's layout: element
// 4i + 2r + c is row row0 + 8r, column 8i + 2t + c) as 16-bit rows of a strided tensor.
#pragma once
#include <cstdint>

#include "mma.cuh"

namespace kernels::flash::detail {

// Rows row0 and row0 + 8 (those below `rows`), columns below `cols` (a head dim padded up
// to N has its columns cols.. dropped), each row r multiplied by mul[r]; row j starts at
// dst + j * ld.
template <typename T, int N>
__device__ __forceinline__ void store_rows(const float (&acc)[N / 2], std::uint16_t* dst, long long ld, int row0,
                                           int rows, int cols, int t, const float (&mul)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row0 + 8 * r >= rows) continue;
    std::uint16_t* row = dst + (row0 + 8 * r) * ld;
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
      if (8 * i < cols)
        *reinterpret_cast<std::uint32_t*>(row + 8 * i + 2 * t) =
            pack2<T>(acc[4 * i + 2 * r] * mul[r], acc[4 * i + 2 * r + 1] * mul[r]);
  }
}

}  // namespace kernels::flash::detail
