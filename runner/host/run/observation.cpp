// What the host saw of a point besides its records: the measurement loops'
// summaries and the GPU's state (NVML) before, during and after.
#include "run/observation.hpp"

#include <algorithm>
#include <cstdio>

namespace runner {
namespace {

nlohmann::json gpu_sample_json(const GpuSample& s) {
  if (!s.valid) return nullptr;
  return {{"sm_clock_mhz", s.sm_clock_mhz},
          {"memory_clock_mhz", s.memory_clock_mhz},
          {"temperature_c", s.temperature_c},
          {"power_w", s.power_w},
          {"throttle_reasons", throttle_reason_names(s.throttle_reasons)}};
}

nlohmann::json summary_json(const MeasureSummary& s, const MeasureSettings& m) {
  nlohmann::json j = {{"mode", s.mode},
                      {"cache", s.cache},
                      {"repetitions", s.repetitions},
                      {"n", s.n},
                      {"rel_stderr", s.n >= 2 ? nlohmann::json(s.rel_stderr) : nlohmann::json(nullptr)},
                      {"target_rel_stderr", s.target_rel_stderr},
                      {"target_met", s.target_met},
                      {"stop_reason", s.stop_reason},
                      {"measured_seconds", s.measured_seconds}};
  // Only where a time-based warm-up was asked: older records stay as they were.
  if (s.warmup_seconds > 0) {
    j["warmup_seconds"] = s.warmup_seconds;
    j["warmup_steps"] = s.warmup_steps;
  }
  // Only where hold_stream was asked; hold_stream false then says nothing was held (CPU).
  if (m.hold_stream || s.hold_stream) {
    j["hold_stream"] = s.hold_stream;
    j["hold_released_by_watchdog"] = s.hold_released_by_watchdog;
  }
  return j;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// Why an adaptive point stopped short of its noise target, naming the setting
// that ended it: a slow step can hit max_seconds before min_steps steps, and then
// the target was never checked at all, however low the noise already was.
std::string missed_target(const MeasureSummary& s, const MeasureSettings& m) {
  const std::string steps = std::to_string(s.n) + " step" + (s.n == 1 ? "" : "s");
  const std::string reps = s.repetitions > 1 ? " in " + std::to_string(s.repetitions) + " repetitions" : "";
  const std::int64_t per_repetition = s.n / std::max(1, s.repetitions);
  if (s.stop_reason == "max_seconds" && per_repetition < m.min_steps)
    return "max_seconds (" + seconds_text(m.max_seconds) + ") ran out after " + steps + reps + ", before min_steps (" +
           std::to_string(m.min_steps) + "), so the noise target " + percent(s.target_rel_stderr) +
           " was never checked (relative standard error " + percent(s.rel_stderr) +
           "); raise measure.max_seconds or lower measure.min_steps";
  const std::string missed = "relative standard error " + percent(s.rel_stderr) + " is above the target " +
                             percent(s.target_rel_stderr) + " after " + steps + reps;
  if (s.stop_reason == "max_steps")
    return missed + ": max_steps (" + std::to_string(m.max_steps) + ") reached; raise measure.max_steps or the target";
  if (s.stop_reason == "max_seconds")
    return missed + ": max_seconds (" + seconds_text(m.max_seconds) +
           ") ran out; raise measure.max_seconds or the target";
  return missed + " (" + s.stop_reason + ")";
}

// The watchdog let a held stream go before its batch was enqueued, so the rest of
// that batch ran as without hold_stream.
std::string watchdog_released(const MeasureSummary& s) {
  const std::int64_t k = s.hold_released_by_watchdog;
  return "measure.hold_stream: the watchdog released the held stream " + std::to_string(k) + " time" +
         (k == 1 ? "" : "s") + " after 250 ms without a step enqueued, so those batches' step times include host "
         "gaps; a step must not synchronize the host (.item(), a synchronize), or lower measure.measured_steps / "
         "measure.min_steps so a held batch's launches fit the stream's queue";
}

}  // namespace

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g%%", 100 * fraction);
  return buf;
}

Observation observe_point(const std::vector<MeasureSummary>& summaries, const MeasureSettings& settings,
                          const GpuSample& before, const GpuSample& after) {
  Observation outcome;
  nlohmann::json measurements = nlohmann::json::array();
  std::uint64_t reasons = after.valid ? after.throttle_reasons : 0;
  unsigned min_sm = after.valid ? after.sm_clock_mhz : 0, max_sm = min_sm;
  int samples = 0;
  for (const MeasureSummary& s : summaries) {
    measurements.push_back(summary_json(s, settings));
    if (s.mode == "adaptive" && !s.target_met)
      outcome.warnings.push_back(missed_target(s, settings));
    if (s.hold_released_by_watchdog > 0)
      outcome.warnings.push_back(watchdog_released(s));
    if (s.gpu_samples > 0) {
      reasons |= s.throttle_reasons;
      min_sm = samples || after.valid ? std::min(min_sm, s.min_sm_clock_mhz) : s.min_sm_clock_mhz;
      max_sm = std::max(max_sm, s.max_sm_clock_mhz);
      samples += s.gpu_samples;
    }
  }
  if (measurements.size() == 1) outcome.fields["measurement"] = measurements[0];
  else if (!measurements.empty()) outcome.fields["measurement"] = measurements;
  if (!before.valid && !after.valid) return outcome;
  const std::uint64_t slowdown = reasons & kSlowdownReasons;
  nlohmann::json gpu = {{"before", gpu_sample_json(before)}, {"after", gpu_sample_json(after)},
                        {"throttled", slowdown != 0}, {"throttle_reasons", throttle_reason_names(slowdown)}};
  if (samples > 0) gpu["during"] = {{"samples", samples}, {"min_sm_clock_mhz", min_sm}, {"max_sm_clock_mhz", max_sm}};
  outcome.fields["gpu"] = gpu;
  if (slowdown) {
    std::string names;
    for (const auto& n : throttle_reason_names(slowdown)) names += (names.empty() ? "" : ", ") + n;
    outcome.warnings.push_back("GPU clocks were throttled during the point (" + names + "; SM clock " +
                               std::to_string(min_sm) + "-" + std::to_string(max_sm) + " MHz)");
  }
  return outcome;
}

}  // namespace runner
