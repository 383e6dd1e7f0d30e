#include "common/dtype.hpp"

#include <stdexcept>

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kernels {

DType dtype_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::F32;
    case at::kBFloat16: return DType::BF16;
    case at::kHalf: return DType::F16;
    default:
      throw std::invalid_argument(std::string(op) + ": dtype " + std::string(c10::toString(t.scalar_type())) +
                                  " is not supported (float32, bfloat16 or float16)");
  }
}

void check_launch(const char* what) {
#ifdef RUNNER_WITH_CUDA
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
#else
  (void)what;
#endif
}

}  // namespace kernels
