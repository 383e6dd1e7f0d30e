// Host-side launches of the cross-entropy kernels (cross_entropy.cu). logits
// [rows, classes] contiguous in `dtype`; targets int64 [rows].
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::cross_entropy {

// Per row: lse = log(sum(exp(logits))) and loss = lse - logits[target] (fp32; NaN
// for a target outside [0, classes)).
void launch_forward(const void* logits, const std::int64_t* targets, float* loss, float* lse, std::int64_t rows,
                    std::int64_t classes, DType dtype, cudaStream_t stream);
// grad_logits = (softmax - onehot(target)) * grad_loss[0] / rows; grad_loss is a
// device scalar (read on the device, so the backward stays graph-capturable).
void launch_backward(const void* logits, const std::int64_t* targets, const float* lse, const float* grad_loss,
                     void* grad_logits, std::int64_t rows, std::int64_t classes, DType dtype, cudaStream_t stream);

}  // namespace kernels::cross_entropy
