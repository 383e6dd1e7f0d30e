// NVML's C ABI is stable across drivers; the few entry points used here are
// declared locally so the build needs neither nvml.h nor the library.
#include "runner/gpu_state.hpp"

#include <dlfcn.h>

#include <mutex>

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace runner {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kClockSm = 1, kClockMemory = 2;  // nvmlClockType_t
constexpr int kTemperatureGpu = 0;             // nvmlTemperatureSensors_t

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*handle_by_pci)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_mw)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  bool ready = false;
};

template <class F>
void bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

const NvmlApi& nvml() {
  static NvmlApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;  // no driver: samples stay invalid
    bind(lib, api.init, "nvmlInit_v2");
    bind(lib, api.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(lib, api.clock, "nvmlDeviceGetClockInfo");
    bind(lib, api.temperature, "nvmlDeviceGetTemperature");
    bind(lib, api.power_mw, "nvmlDeviceGetPowerUsage");
    bind(lib, api.reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (api.reasons == nullptr) bind(lib, api.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    api.ready = api.init && api.handle_by_pci && api.clock && api.temperature && api.power_mw && api.reasons &&
                api.init() == 0;
  });
  return api;
}

}  // namespace

GpuSample sample_gpu(const c10::Device& device) {
  GpuSample s;
#ifdef RUNNER_WITH_CUDA
  if (!device.is_cuda()) return s;
  const NvmlApi& api = nvml();
  if (!api.ready) return s;
  // The PCI bus id names the same GPU for CUDA and NVML whatever CUDA_VISIBLE_DEVICES says.
  char bus_id[32] = {0};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device.index() < 0 ? 0 : device.index()) != cudaSuccess) return s;
  NvmlDevice handle = nullptr;
  if (api.handle_by_pci(bus_id, &handle) != 0) return s;
  unsigned power_mw = 0;
  unsigned long long reasons = 0;
  s.valid = api.clock(handle, kClockSm, &s.sm_clock_mhz) == 0 &&
            api.clock(handle, kClockMemory, &s.memory_clock_mhz) == 0 &&
            api.temperature(handle, kTemperatureGpu, &s.temperature_c) == 0 &&
            api.power_mw(handle, &power_mw) == 0 && api.reasons(handle, &reasons) == 0;
  s.power_w = power_mw / 1000.0;
  s.throttle_reasons = reasons;
#else
  (void)device;
#endif
  return s;
}

std::vector<std::string> throttle_reason_names(std::uint64_t reasons) {
  static const std::pair<std::uint64_t, const char*> kNames[] = {
      {0x1, "gpu_idle"},           {0x2, "applications_clocks_setting"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},        {0x10, "sync_boost"},                 {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"},  {0x100, "display_clock_setting"},
  };
  std::vector<std::string> out;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (reasons & bit) out.emplace_back(name);
  }
  if (reasons & ~known) out.emplace_back("other");
  return out;
}

}  // namespace runner
