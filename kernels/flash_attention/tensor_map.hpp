// Host side of the TMA loads of the warp-specialized kernels (flash_forward_sm90_ws.cu,
// flash_backward_sm90_ws.cu): a [batch, seq, heads, d] view (flash_launch.hpp, Layout) as a
// CUtensorMap, through the driver's encoder found via the runtime (no libcuda link needed).
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "flash_launch.hpp"

namespace kernels::flash::detail {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

inline EncodeTiled tensor_map_encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return EncodeTiled{nullptr};
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// The view as a 4-D tensor map (d innermost) read in boxes of 64 columns x box_rows rows of
// one head, 128-byte swizzled (the SW128 panels the wgmma descriptors read); rows past seq
// and columns past d arrive as zeros. False where the view cannot be one (a broadcast
// dimension, a stride that is not a multiple of 16 bytes) or the driver says no: the kernel
// then takes a cp.async path.
inline bool encode_tensor_map(CUtensorMap* map, const void* base, const Layout& at, int bh, int seq, int d,
                              DType dtype, int box_rows) {
  const EncodeTiled fn = tensor_map_encoder();
  if (fn == nullptr || at.heads <= 0 || bh % at.heads != 0) return false;
  const long long sizes[3] = {seq, at.heads, bh / at.heads}, steps[3] = {at.row, at.head, at.batch};
  cuuint64_t dims[4] = {static_cast<cuuint64_t>(d)}, strides[3];
  for (int i = 0; i < 3; ++i) {
    dims[i + 1] = static_cast<cuuint64_t>(sizes[i]);
    const long long bytes = sizes[i] == 1 ? 16 : steps[i] * 2;  // a dimension of one is never stepped
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (1LL << 40)) return false;
    strides[i] = static_cast<cuuint64_t>(bytes);
  }
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1}, unit[4] = {1, 1, 1, 1};
  const CUresult r = fn(map, dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                        4, const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

}  // namespace kernels::flash::detail
