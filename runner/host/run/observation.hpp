// What the host records about how a point was measured (the record's
// "measurement") and what the GPU did meanwhile (its "gpu"), with warnings for
// a missed noise target or throttled clocks.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/gpu_state.hpp"
#include "runner/measure.hpp"

namespace runner {

struct Observation {
  nlohmann::json fields = nlohmann::json::object();  // "measurement", "gpu"
  std::vector<std::string> warnings;
};

// `summaries`: the point's measure_steps calls (Context::measurements), made with
// `settings` (named in a missed-target warning); `before` and `after`: NVML samples
// around the point (invalid on CPU or without NVML).
Observation observe_point(const std::vector<MeasureSummary>& summaries, const MeasureSettings& settings,
                          const GpuSample& before, const GpuSample& after);

// 0.0123 -> "1.2%"
std::string percent(double fraction);

}  // namespace runner
