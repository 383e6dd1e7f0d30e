// Host-side launch of the RoPE kernel (rope.cu): up to three [batch, seq, heads, d_head]
// parts (q, k and v of one attention), each read from and written to its own strided view.
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::rope {

// One part's input and output: element strides of batch, seq and head (d_head is contiguous).
struct PartView {
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t in_batch = 0, in_seq = 0, in_head = 0, out_batch = 0, out_seq = 0, out_head = 0;
};

// Parts [0, rotated) are rotated by position * theta^(-2i/d_head) with cos/sin tables
// [>= seq, d_head / 2] fp32 (sign -1: the inverse rotation, the backward), parts
// [rotated, count) are copied. in may equal out (in place). count 1..3.
void launch_rope(const PartView* parts, int count, int rotated, const float* cos, const float* sin,
                 std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t d_head, float sign,
                 DType dtype, cudaStream_t stream);

}  // namespace kernels::rope
