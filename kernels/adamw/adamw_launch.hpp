// Host-side launch of the fused AdamW kernel (implemented in fused_adamw.cu).
#pragma once
#include <cstdint>

#include "common/launch.hpp"

namespace kernels::adamw {

constexpr int kMaxTensorsPerLaunch = 32;
constexpr std::int64_t kChunkElements = 65536;

// Up to kMaxTensorsPerLaunch tensors whose gradients share one dtype (and copies one
// dtype). Passed to the kernel by value (about 2 KB of kernel parameters), so a CUDA graph
// captures the pointers with the launch and nothing is copied to the device.
struct TensorBatch {
  float* param[kMaxTensorsPerLaunch];
  const void* grad[kMaxTensorsPerLaunch];
  float* exp_avg[kMaxTensorsPerLaunch];
  float* exp_avg_sq[kMaxTensorsPerLaunch];
  const float* step[kMaxTensorsPerLaunch];
  void* copy[kMaxTensorsPerLaunch];  // the weight's low-precision copy, written after the update (null: none)
  std::int64_t numel[kMaxTensorsPerLaunch];
  int chunk_begin[kMaxTensorsPerLaunch + 1];  // prefix sums of chunks per tensor
  int count = 0;
};

struct Hyperparameters {
  double lr, beta1, beta2, eps, weight_decay;
};

// copy_dtype: the dtype of every batch.copy (BF16 or F16), or none when the batch has no copies.
enum class CopyDType { None, BF16, F16 };
void launch_fused_adamw(const TensorBatch& batch, DType grad_dtype, CopyDType copy_dtype, const Hyperparameters& h,
                        cudaStream_t stream);

}  // namespace kernels::adamw
