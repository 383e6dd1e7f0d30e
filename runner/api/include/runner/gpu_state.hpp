// GPU clocks, temperature, power and throttle reasons through NVML, loaded at
// run time (dlopen libnvidia-ml.so.1): builds and CPU machines need no driver.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

namespace runner {

// What the GPU reported (through NVML) at one moment; `valid` false on CPU or
// without a driver.
struct GpuSample {
  bool valid = false;
  unsigned sm_clock_mhz = 0, memory_clock_mhz = 0, temperature_c = 0;
  double power_w = 0;
  std::uint64_t throttle_reasons = 0;  // NVML clocks-event reason bits
};

// Invalid (valid == false) on CPU, without NVML, or when a query fails.
GpuSample sample_gpu(const c10::Device& device);

// Reasons that slow the clocks down (power cap, thermal, hardware slowdown,
// power brake); idle, application-clock, sync-boost and display bits are not.
inline constexpr std::uint64_t kSlowdownReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
// "sw_power_cap", "hw_thermal_slowdown", ... for each set bit.
std::vector<std::string> throttle_reason_names(std::uint64_t reasons);

}  // namespace runner
