// Timing: on CUDA every phase is bracketed by a pair of CUDA events on the
// current stream, so the numbers are device time, independent of launch-queue
// depth; the host waits (event sync) after each step only when sync_each_step is
// set. On CPU the same phases use a steady clock.
#include <chrono>
#include <memory>
#include <stdexcept>

#include "runner/context.hpp"
#include "runner/measure.hpp"
#include "runner/range.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct PhaseSample {
  std::string name;
  double host_ms = 0;
#ifdef RUNNER_WITH_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> start, end;
#endif
};

class RecordingTimer : public StepTimer {
 public:
  explicit RecordingTimer(bool cuda) : cuda_(cuda) {}

  void phase(const std::string& name, const std::function<void()>& fn) override {
    PhaseSample s;
    s.name = name;
    ScopedRange range(name);
#ifdef RUNNER_WITH_CUDA
    if (cuda_) {
      s.start = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      s.end = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      s.start->record();
      fn();
      s.end->record();
      samples.push_back(std::move(s));
      return;
    }
#endif
    const auto t0 = Clock::now();
    fn();
    s.host_ms = ms_between(t0, Clock::now());
    samples.push_back(std::move(s));
  }

  std::vector<PhaseSample> samples;

 private:
  bool cuda_;
};

struct StepSamples {
  std::vector<PhaseSample> phases;
  double wall_ms = 0;
};

void collect(const StepSamples& step, PhaseTimes& out) {
  double step_ms = 0;
  for (const PhaseSample& s : step.phases) {
    double ms = s.host_ms;
#ifdef RUNNER_WITH_CUDA
    if (s.start) ms = s.start->elapsed_time(*s.end);
#endif
    if (!out.ms.count(s.name)) out.order.push_back(s.name);
    out.ms[s.name].push_back(ms);
    step_ms += ms;
  }
  out.ms["step"].push_back(step_ms);
  out.ms["wall"].push_back(step.wall_ms);
}

}  // namespace

PhaseTimes measure_steps(Context& ctx, const std::function<void(StepTimer&)>& step) {
  const MeasureSettings& m = ctx.measure;
  if (m.warmup_steps < 0 || m.measured_steps < 1) {
    throw std::runtime_error("measure: need warmup_steps >= 0 and measured_steps >= 1");
  }
  const bool cuda = ctx.device.is_cuda();
  {
    ScopedRange warmup("warmup");
    for (int i = 0; i < m.warmup_steps; ++i) {
      ScopedRange r("step_" + std::to_string(i));
      RecordingTimer timer(cuda);
      step(timer);
      ctx.synchronize();
    }
  }
  std::vector<StepSamples> steps;
  {
    ScopedRange measure("measure");
    ctx.synchronize();
    for (int i = 0; i < m.measured_steps; ++i) {
      ScopedRange r("step_" + std::to_string(i));
      RecordingTimer timer(cuda);
      const auto t0 = Clock::now();
      step(timer);
      if (m.sync_each_step) ctx.synchronize();
      steps.push_back({std::move(timer.samples), ms_between(t0, Clock::now())});
    }
    ctx.synchronize();
  }
  PhaseTimes out;
  for (const StepSamples& s : steps) collect(s, out);
  out.order.push_back("step");
  if (m.sync_each_step) out.order.push_back("wall");
  else out.ms.erase("wall");
  return out;
}

}  // namespace runner
