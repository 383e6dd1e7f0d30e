// Device queries tasks and profilers share: memory counters of the caching
// allocator, its cache, and what the device is.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace runner {

struct DeviceMemory {
  std::int64_t allocated_bytes = 0;       // held by live tensors now
  std::int64_t peak_allocated_bytes = 0;  // since the last reset_peak_memory
  std::int64_t reserved_bytes = 0;        // held by the caching allocator
};

// nullopt on CPU: LibTorch keeps no allocator statistics there.
std::optional<DeviceMemory> device_memory(const c10::Device& device);
void reset_peak_memory(const c10::Device& device);
// Returns cached blocks to the driver (after an OOM, between points). Throws
// runner::DeviceFault when the device has a sticky error.
void release_cached_memory(const c10::Device& device);
// The message of a sticky device error (illegal address, launch failure, ...)
// that leaves the CUDA context unusable; nullopt when the device is healthy or a CPU.
std::optional<std::string> device_fault(const c10::Device& device);
bool cuda_available();
// A fresh generator on `device` (CPU or CUDA) seeded with `seed`, independent of
// the global one, so weights and batches do not depend on what ran before.
at::Generator seeded_generator(const c10::Device& device, std::uint64_t seed);
// "NVIDIA H100 80GB HBM3" or the CPU model from /proc/cpuinfo.
std::string device_name(const c10::Device& device);

}  // namespace runner
