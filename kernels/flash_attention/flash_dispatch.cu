// launch_forward / launch_backward: the one place a launch's runtime choices become compiled
// kernels. Family (fp32 inputs on CUDA cores; a.wgmma: Hopper warpgroup MMAs, forward schedule
// serial/pipelined or warp-specialized; else mma.sync), then input type, then kernel head dim
// (flash_launch.hpp's lists). Host code only: the kernels live in the families' files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "flash_launch.hpp"

namespace kernels::flash::detail {
namespace {

template <typename T>
struct Type {
  using type = T;
};

// f(Type<__half>{}) or f(Type<__nv_bfloat16>{}) for a 16-bit dtype.
template <typename F>
void with_16bit_type(DType dtype, const char* what, F f) {
  if (dtype == DType::F16) return f(Type<__half>{});
  if (dtype == DType::BF16) return f(Type<__nv_bfloat16>{});
  throw std::invalid_argument(std::string(what) + ": fp32 inputs take the CUDA-core kernels");
}

[[noreturn]] void not_compiled(const char* what, int d_kernel) {
  throw std::invalid_argument(std::string(what) + ": kernel head dim " + std::to_string(d_kernel) + " not compiled");
}

// f(std::integral_constant<int, D>{}) for the D of the list that equals d_kernel.
#define RUNNER_FLASH_CASE(D) \
  case D: return f(std::integral_constant<int, D>{});
template <typename F>
void with_mma_sync_head_dim(int d_kernel, const char* what, F f) {
  switch (d_kernel) { RUNNER_FLASH_MMA_SYNC_HEAD_DIMS(RUNNER_FLASH_CASE) }
  not_compiled(what, d_kernel);
}
template <typename F>
void with_wgmma_head_dim(int d_kernel, const char* what, F f) {
  switch (d_kernel) { RUNNER_FLASH_WGMMA_HEAD_DIMS(RUNNER_FLASH_CASE) }
  not_compiled(what, d_kernel);
}
#undef RUNNER_FLASH_CASE

}  // namespace

void launch_forward(const ForwardArgs& a, cudaStream_t stream) {
  if (a.dtype == DType::F32 && !a.wgmma)
    return with_mma_sync_head_dim(a.d_kernel, "flash forward (fp32)",
                                  [&](auto d) { forward_fp32<decltype(d)::value>(a, stream); });
  const char* what = a.wgmma ? "flash forward (wgmma)" : "flash forward (mma_sync)";
  with_16bit_type(a.dtype, what, [&](auto type) {
    using T = typename decltype(type)::type;
    if (!a.wgmma)
      return with_mma_sync_head_dim(a.d_kernel, what, [&](auto d) { forward_mma_sync<T, decltype(d)::value>(a, stream); });
    with_wgmma_head_dim(a.d_kernel, what, [&](auto d) {
      constexpr int D = decltype(d)::value;
      if (a.warp_specialized) return forward_wgmma_ws<T, D>(a, stream);
      forward_wgmma<T, D>(a, stream);
    });
  });
}

void launch_backward(const BackwardArgs& a, cudaStream_t stream) {
  if (a.dtype == DType::F32 && !a.wgmma)
    return with_mma_sync_head_dim(a.d_kernel, "flash backward (fp32)",
                                  [&](auto d) { backward_fp32<decltype(d)::value>(a, stream); });
  const char* what = a.wgmma ? "flash backward (wgmma)" : "flash backward (mma_sync)";
  with_16bit_type(a.dtype, what, [&](auto type) {
    using T = typename decltype(type)::type;
    if (!a.wgmma)
      return with_mma_sync_head_dim(a.d_kernel, what, [&](auto d) { backward_mma_sync<T, decltype(d)::value>(a, stream); });
    with_wgmma_head_dim(a.d_kernel, what, [&](auto d) { backward_wgmma<T, decltype(d)::value>(a, stream); });
  });
}

}  // namespace kernels::flash::detail
