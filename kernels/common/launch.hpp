// What the .cu files of kernels/ share with the C++ side that calls them: plain
// pointers, sizes and a dtype tag, no LibTorch headers. nvcc then compiles only
// the kernels, and every kernel is instantiated for exactly the dtypes below.
#pragma once
#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace kernels {

// Element type of activations / gradients a kernel reads or writes.
enum class DType : int { F32 = 0, BF16 = 1, F16 = 2 };

// Throws std::runtime_error naming `what` when the last launch failed.
void check_launch(const char* what);

}  // namespace kernels
