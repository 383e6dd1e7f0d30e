// Host-side launches of the SwiGLU activation kernels (swiglu.cu); all tensors
// contiguous, n elements of `dtype`.
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::swiglu {

void launch_forward(const void* a, const void* b, void* out, std::int64_t n, DType dtype, cudaStream_t stream);
void launch_backward(const void* grad, const void* a, const void* b, void* da, void* db, std::int64_t n, DType dtype,
                     cudaStream_t stream);

}  // namespace kernels::swiglu
