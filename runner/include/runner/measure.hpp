// The measurement loop every task shares: warm-up steps, then timed steps, each
// step split into named phases. On CUDA, phases are timed with CUDA events; on
// CPU, with a steady clock. NVTX ranges mark warmup/measure steps and phases.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace runner {

struct MeasureSettings {
  int warmup_steps = 5;
  int measured_steps = 10;
  // Synchronize the device after every step (the spec's "synchronize after each
  // step"); when false, events are read once after the last step.
  bool sync_each_step = true;
};

class Context;

class StepTimer {
 public:
  virtual ~StepTimer();
  // Runs fn inside a phase named `name`; its time is added to that phase.
  virtual void phase(const std::string& name, const std::function<void()>& fn) = 0;
};

struct PhaseTimes {
  std::vector<std::string> order;                     // phases in first-seen order, then "step"
  std::map<std::string, std::vector<double>> ms;      // per measured step
};

// Runs warmup + measured steps of `step` and returns the measured steps' times.
// "step" holds the whole step (first phase start to last phase end).
PhaseTimes measure_steps(Context& ctx, const std::function<void(StepTimer&)>& step);

}  // namespace runner
