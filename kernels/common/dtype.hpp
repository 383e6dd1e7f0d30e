// Maps tensors to the kernels' dtype tag and checks what the kernels assume.
#pragma once
#include <string>

#include <ATen/core/Tensor.h>

#include "common/launch.hpp"

namespace kernels {

// F32, BF16 or F16; throws std::invalid_argument naming `op` for anything else.
DType dtype_of(const at::Tensor& t, const char* op);

}  // namespace kernels
