// Host-side launch of the RoPE kernel (rope.cu).
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::rope {

// Rotates q and k ([batch, seq, heads, d_head] contiguous, `dtype`) into q_out and
// k_out with cos/sin tables [>= seq, d_head / 2] fp32. sign -1 applies the inverse
// rotation (the backward: the transpose of a rotation is the rotation by -angle).
void launch_rope(const void* q, const void* k, void* q_out, void* k_out, const float* cos, const float* sin,
                 std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t d_head, float sign,
                 DType dtype, cudaStream_t stream);

}  // namespace kernels::rope
