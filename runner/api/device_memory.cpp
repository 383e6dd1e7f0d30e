#include <fstream>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "runner/device.hpp"
#include "runner/outcome.hpp"

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace runner {

bool cuda_available() {
#ifdef RUNNER_WITH_CUDA
  return c10::cuda::device_count() > 0;
#else
  return false;
#endif
}

std::optional<DeviceMemory> device_memory(const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    using c10::CachingAllocator::StatType;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    const auto all = static_cast<size_t>(StatType::AGGREGATE);
    DeviceMemory m;
    m.allocated_bytes = stats.allocated_bytes[all].current;
    m.peak_allocated_bytes = stats.allocated_bytes[all].peak;
    m.reserved_bytes = stats.reserved_bytes[all].current;
    return m;
  }
#endif
  (void)device;
  return std::nullopt;
}

void reset_peak_memory(const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
  (void)device;
}

void release_cached_memory(const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    // Freeing blocks on a poisoned context would fail later and less clearly.
    if (const auto fault = device_fault(device)) throw DeviceFault(*fault);
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#endif
  (void)device;
}

std::optional<std::string> device_fault(const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    // A sticky error survives cudaGetLastError and returns on the next call; an
    // ordinary one (a bad launch argument) is cleared by it.
    const cudaError_t first = cudaDeviceSynchronize();
    if (first == cudaSuccess) return std::nullopt;
    (void)cudaGetLastError();
    const cudaError_t again = cudaDeviceSynchronize();
    if (again == cudaSuccess) return std::nullopt;
    return std::string("CUDA context unusable: ") + cudaGetErrorName(again) + ": " + cudaGetErrorString(again);
  }
#endif
  (void)device;
  return std::nullopt;
}

at::Generator seeded_generator(const c10::Device& device, std::uint64_t seed) {
  at::Generator gen = device.is_cuda() ? at::detail::getCUDAHooks().getNewGenerator(device.index())
                                       : at::make_generator<at::CPUGeneratorImpl>(seed);
  gen.set_current_seed(seed);
  return gen;
}

std::string device_name(const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device.index() < 0 ? 0 : device.index()) == cudaSuccess) return prop.name;
  }
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

}  // namespace runner
