// Programmatic dependent launch (Hopper): a kernel launched with it may start while the kernel
// before it on the stream finishes, so its launch latency and prologue (barrier setup, tensor-map
// prefetch) overlap that kernel's last blocks. The backward's three kernels chain this way: the
// delta pass -> the warp-specialized dK/dV/dQ kernel -> the dQ conversion. A dependent waits
// (dependent_wait) before it touches what the kernel before it wrote; a kernel lets its dependent
// launch early (dependent_release) once all of its blocks have started. Launched without the
// attribute, both instructions do nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace kernels::flash::detail {

__device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void dependent_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent of the kernel
// before it on the stream when `dependent`.
template <typename... Params, typename... Args>
cudaError_t launch_maybe_dependent(bool dependent, void (*kernel)(Params...), unsigned grid, unsigned block,
                                   std::size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace kernels::flash::detail
