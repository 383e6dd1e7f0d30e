// The measurement loop every task shares: warm-up steps, then timed steps, each
// step split into named phases, repeated `repetitions` times.
//
// A step's time ("step") is the span from the start of its first phase to the
// end of its last phase: everything the step put on the device (or, on CPU, did)
// between those marks, gaps between phases included. Phases are timed alone, so
// the phases' sum is at most the step. On CUDA the marks are CUDA events created
// once before the measured loop; on CPU a steady clock. "wall" is the host's time
// for the step including the synchronize (only with sync_each_step).
//
// Stopping: with target_rel_stderr = 0 every repetition measures exactly
// measured_steps. With a target, it measures at least min_steps, then stops as
// soon as the relative standard error of the mean step time (std / sqrt(n) /
// mean) is at or below the target, or at max_steps, or once the measured steps
// have taken max_seconds, whichever comes first.
//
// NVTX ranges mark warmup/measure, each step and each phase.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runner/context.hpp"
#include "runner/record.hpp"

namespace runner {

class StepTimer {
 public:
  virtual ~StepTimer();
  // Runs fn inside a phase named `name`; its time is added to that phase.
  virtual void phase(const std::string& name, const std::function<void()>& fn) = 0;
};

// Work one step does; rates are derived per step from the step's time.
struct StepWork {
  double items = 0;                 // e.g. tokens per step -> "<item_name>_per_s"
  std::string item_name = "items";  // e.g. "tokens" (unit "tokens/s")
  double flop = 0;                  // -> "tflops" (TFLOP/s)
  double bytes = 0;                 // bytes read + written -> "gbps" (GB/s)
};

struct PhaseTimes {
  std::vector<std::string> order;                 // phases in first-seen order, then "step" (and "wall")
  std::map<std::string, std::vector<double>> ms;  // per measured step, repetitions one after another
  std::vector<std::int64_t> repetition_steps;     // steps measured in each repetition
  MeasureSummary summary;

  // Stats of per-step values (one per measured step, like ms[...]) with one
  // mean per repetition when there were several.
  Stats stats_of(const std::vector<double>& per_step) const;
  Stats stats(const std::string& phase) const { return stats_of(ms.at(phase)); }
  // Adds "<phase>_ms" for every phase in `order`, and the rates of `work` per
  // `rate_phase` (default: the whole step).
  void record(Record& r, const StepWork& work = {}, const std::string& rate_phase = "step") const;
  // Adds only the rates of `work` over `phase`'s times.
  void record_rates(Record& r, const StepWork& work, const std::string& phase = "step") const;
};

// Runs warm-up + measured steps of `step` (repeated) and returns the measured
// steps' times. Appends its summary to ctx.measurements.
PhaseTimes measure_steps(Context& ctx, const std::function<void(StepTimer&)>& step);

// Relative standard error of the mean: std / sqrt(n) / |mean| (0 for n < 2).
double rel_stderr(const std::vector<double>& samples);

}  // namespace runner
