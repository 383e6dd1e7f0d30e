// Host-side launches of the SwiGLU activation kernels (swiglu.cu): [rows, cols] matrices of
// `dtype` whose rows may be strided (the two halves of one fused w1 | w3 projection).
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::swiglu {

// a, b: [rows, cols] with row stride in_stride (elements; a and b may be the two halves of one
// [rows, 2 cols] buffer), out [rows, cols] with row stride out_stride.
void launch_forward(const void* a, const void* b, void* out, std::int64_t rows, std::int64_t cols,
                    std::int64_t in_stride, std::int64_t out_stride, DType dtype, cudaStream_t stream);
// grad [rows, cols] (row stride grad_stride); da, db like a, b but with row stride out_stride.
void launch_backward(const void* grad, const void* a, const void* b, void* da, void* db, std::int64_t rows,
                     std::int64_t cols, std::int64_t grad_stride, std::int64_t in_stride, std::int64_t out_stride,
                     DType dtype, cudaStream_t stream);

}  // namespace kernels::swiglu
