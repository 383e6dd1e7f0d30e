// GPU clocks, temperature, power and throttle reasons through NVML, loaded at
// run time (dlopen libnvidia-ml.so.1): builds and CPU machines need no driver.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "runner/measure.hpp"

namespace runner {

// Invalid (valid == false) on CPU, without NVML, or when a query fails.
GpuSample sample_gpu(const c10::Device& device);

// Reasons that slow the clocks down (power cap, thermal, hardware slowdown,
// power brake); idle, application-clock, sync-boost and display bits are not.
inline constexpr std::uint64_t kSlowdownReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
// "sw_power_cap", "hw_thermal_slowdown", ... for each set bit.
std::vector<std::string> throttle_reason_names(std::uint64_t reasons);

}  // namespace runner
