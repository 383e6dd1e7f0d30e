// Launchers of the flash-attention kernels (internal: flash_attention.cpp checks the
// inputs and calls these). Tensors are [bh, seq, d], contiguous, on the current device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tile_order.hpp"

namespace kernels::flash::detail {

enum class Dtype { fp32, fp16, bf16 };

struct ForwardArgs {
  const void *q, *k, *v;
  void* out;
  float* lse;  // [bh, lq], natural log of the row's softmax normaliser
  int bh, lq, lk, d;
  bool causal;
  Dtype dtype;
  float scale;
  bool wgmma = false;  // Hopper warpgroup-MMA kernels (flash_forward_sm90.cu) instead of mma.sync
};

struct BackwardArgs {
  const void *q, *k, *v, *dout;
  const float* lse;    // from forward
  const float* delta;  // [bh, lq] rowsum(out * dout) in fp32
  void *dq, *dk, *dv;
  int bh, lq, lk, d;
  bool causal;
  Dtype dtype;
  float scale;
  bool wgmma = false;  // flash_backward_sm90.cu instead of flash_backward.cu
  // wgmma only: a zeroed fp32 [bh, lq, d] buffer selects the fused backward (dQ summed with
  // atomics); null selects the deterministic two-kernel one.
  float* dq_accum = nullptr;
};

// A two-way choice read from the environment (the wgmma kernels' schedules): true when
// `variable` is unset or `when_unset`, false when `other`; any other value throws.
inline bool env_choice(const char* variable, const char* when_unset, const char* other) {
  const char* value = std::getenv(variable);
  if (value == nullptr || std::strcmp(value, when_unset) == 0) return true;
  if (std::strcmp(value, other) == 0) return false;
  throw std::invalid_argument(std::string(variable) + "='" + value + "' is not one of " + when_unset + ", " + other);
}

// Heads per group of the kernels' block order (tile_order.hpp) for operands of
// `bytes_per_head` streamed per head, sized to the current device's L2;
// RUNNER_FLASH_HEAD_GROUP=N (a positive integer) overrides it, 1 = head after head.
inline int head_group(int bh, long long bytes_per_head) {
  int device = 0, l2 = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  int override_group = 0;
  if (const char* value = std::getenv("RUNNER_FLASH_HEAD_GROUP"); value != nullptr && *value != '\0') {
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (*end != '\0' || n < 1 || n > 65535)
      throw std::invalid_argument(std::string("RUNNER_FLASH_HEAD_GROUP='") + value + "' is not a positive integer");
    override_group = static_cast<int>(n);
  }
  return heads_per_group(bh, bytes_per_head, l2, override_group);
}

// rowsum(out * dout) in fp32 into delta [rows]; zeroed (optional, fp32 [rows, d]) is set to 0.
struct DeltaArgs {
  const void *out, *dout;
  float* delta;
  float* zeroed;
  long rows;
  int d;
  Dtype dtype;
};
void launch_backward_delta(const DeltaArgs& a, cudaStream_t stream);

void launch_forward(const ForwardArgs& a, cudaStream_t stream);
void launch_backward(const BackwardArgs& a, cudaStream_t stream);
// Hopper warpgroup-MMA kernels (sm_90a; bf16/fp16; d 64 and 128): flash_*_sm90.cu.
void launch_forward_sm90(const ForwardArgs& a, cudaStream_t stream);
void launch_backward_sm90(const BackwardArgs& a, cudaStream_t stream);
// RUNNER_FLASH_WGMMA_BACKWARD: fused (default) or deterministic; anything else throws.
bool wgmma_backward_fuses_dq();
// fp32 inputs take CUDA-core kernels (exact fp32 arithmetic); see flash_fp32.cu.
void launch_forward_fp32(const ForwardArgs& a, cudaStream_t stream);
void launch_backward_fp32(const BackwardArgs& a, cudaStream_t stream);

}  // namespace kernels::flash::detail
