// Timing: a step's phases are bracketed by marks (CUDA events on the current
// stream, or steady-clock times on CPU). The events are created before the
// measured loop and reused once their times were read, so event creation never
// lands inside a timed step. The host waits after every step only with
// sync_each_step; otherwise it reads a batch of steps at once. With hold_stream
// the batch (at most kMaxHeldSteps) is enqueued behind a wait the host releases
// once the batch is queued (stream_hold.hpp says why).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>

#include <ATen/ATen.h>

#include "runner/context.hpp"
#include "runner/gpu_state.hpp"
#include "runner/measure.hpp"
#include "runner/range.hpp"

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "stream_hold.hpp"
#endif

#include <unistd.h>

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGpuSampleEverySeconds = 0.05;
// Steps enqueued behind one hold (measure.hold_stream) at most. The GPU runs none
// of them until the release, so all their launches and events wait in the
// stream's queue, which is finite: once it fills, the host blocks inside a launch
// until the watchdog releases the hold (and those steps then include host gaps).
// 32 steps of a few tens of launches each stay well inside it.
constexpr int kMaxHeldSteps = 32;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Time marks, indexed; reset() makes them reusable once read.
class Marks {
 public:
  explicit Marks(bool cuda) : cuda_(cuda) {}
  ~Marks() {
#ifdef RUNNER_WITH_CUDA
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
#endif
  }
  Marks(const Marks&) = delete;
  Marks& operator=(const Marks&) = delete;

  void reserve(size_t n) {
#ifdef RUNNER_WITH_CUDA
    while (cuda_ && events_.size() < n) {
      cudaEvent_t e = nullptr;
      const cudaError_t err = cudaEventCreate(&e);
      if (err != cudaSuccess) throw std::runtime_error(std::string("cudaEventCreate: ") + cudaGetErrorString(err));
      events_.push_back(e);
    }
#endif
    if (!cuda_ && times_.size() < n) times_.resize(n);
  }
  size_t mark() {
    const size_t i = next_++;
    reserve(next_);  // grows only if a step has more phases than seen in warm-up
#ifdef RUNNER_WITH_CUDA
    if (cuda_) {
      cudaEventRecord(events_[i], c10::cuda::getCurrentCUDAStream().stream());
      return i;
    }
#endif
    times_[i] = Clock::now();
    return i;
  }
  double ms(size_t a, size_t b) const {
#ifdef RUNNER_WITH_CUDA
    if (cuda_) {
      float out = 0;
      const cudaError_t err = cudaEventElapsedTime(&out, events_[a], events_[b]);
      if (err != cudaSuccess) throw std::runtime_error(std::string("cudaEventElapsedTime: ") + cudaGetErrorString(err));
      return out;
    }
#endif
    return std::chrono::duration<double, std::milli>(times_[b] - times_[a]).count();
  }
  void reset() { next_ = 0; }
  size_t used() const { return next_; }

 private:
  bool cuda_;
  size_t next_ = 0;
  std::vector<Clock::time_point> times_;
#ifdef RUNNER_WITH_CUDA
  std::vector<cudaEvent_t> events_;
#endif
};

struct PhaseMark {
  std::string name;
  size_t start = 0, end = 0;
};

struct StepMarks {
  std::vector<PhaseMark> phases;
  double wall_ms = 0;
};

class MarkingTimer : public StepTimer {
 public:
  explicit MarkingTimer(Marks& marks) : marks_(marks) {}
  void phase(const std::string& name, const std::function<void()>& fn) override {
    ScopedRange range(name);
    PhaseMark m;
    m.name = name;
    m.start = marks_.mark();
    fn();
    m.end = marks_.mark();
    current.phases.push_back(std::move(m));
  }
  StepMarks current;

 private:
  Marks& marks_;
};

// Writes a buffer larger than the last-level cache so the next step starts cold.
class CacheFlusher {
 public:
  explicit CacheFlusher(const c10::Device& device) {
    std::int64_t bytes = 64ll << 20;
#ifdef RUNNER_WITH_CUDA
    if (device.is_cuda()) {
      int l2 = 0;
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device.index() < 0 ? 0 : device.index());
      bytes = std::max<std::int64_t>(2ll * l2, 8ll << 20);
    }
#endif
    if (!device.is_cuda()) {
      const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
      if (l3 > 0) bytes = std::max<std::int64_t>(2ll * l3, 8ll << 20);
    }
    buffer_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  }
  void flush() { buffer_.fill_(++value_); }

 private:
  at::Tensor buffer_;
  std::uint8_t value_ = 0;
};

struct GpuWatch {
  explicit GpuWatch(const c10::Device& d) : device(d) {}
  void sample(MeasureSummary& s) {
    if (!device.is_cuda() || seconds_since(last) < kGpuSampleEverySeconds) return;
    last = Clock::now();
    const GpuSample g = sample_gpu(device);
    if (!g.valid) return;
    s.min_sm_clock_mhz = s.gpu_samples ? std::min(s.min_sm_clock_mhz, g.sm_clock_mhz) : g.sm_clock_mhz;
    s.max_sm_clock_mhz = std::max(s.max_sm_clock_mhz, g.sm_clock_mhz);
    s.max_temperature_c = std::max(s.max_temperature_c, g.temperature_c);
    s.max_power_w = std::max(s.max_power_w, g.power_w);
    s.throttle_reasons |= g.throttle_reasons;
    ++s.gpu_samples;
  }
  c10::Device device;
  Clock::time_point last{};
};

void validate(const MeasureSettings& m) {
  if (m.warmup_steps < 0 || m.measured_steps < 1 || m.repetitions < 1 || !(m.warmup_seconds >= 0))
    throw std::runtime_error(
        "measure: need warmup_steps >= 0, warmup_seconds >= 0, measured_steps >= 1 and repetitions >= 1");
  if (m.adaptive() && (m.min_steps < 2 || m.max_steps < m.min_steps || m.max_seconds <= 0))
    throw std::runtime_error("measure: adaptive stopping needs 2 <= min_steps <= max_steps and max_seconds > 0");
  if (m.cache != "warm" && m.cache != "cold") throw std::runtime_error("measure: cache must be warm or cold");
  if (m.hold_stream && m.sync_each_step)
    throw std::runtime_error("measure.hold_stream needs sync_each_step: false: a held batch runs only once its last "
                             "step is enqueued, and sync_each_step waits for every step before that");
}

// Whether steps are held: asked, without sync_each_step, and on a CUDA device
// (on CPU there is no stream to hold; the steps are measured as without it).
bool holds_stream(const MeasureSettings& m, const c10::Device& device) {
#ifdef RUNNER_WITH_CUDA
  return m.hold_stream && !m.sync_each_step && device.is_cuda();
#else
  (void)m, (void)device;
  return false;
#endif
}

// One repetition's measured steps, per phase, plus why it stopped.
struct Repetition {
  std::map<std::string, std::vector<double>> ms;
  std::vector<std::string> order;
  std::string stop_reason;
  bool target_met = true;
  double seconds = 0;
};

class Loop {
 public:
  Loop(Context& ctx, const std::function<void(StepTimer&)>& step)
      : ctx_(ctx), m_(ctx.measure), step_(step), marks_(ctx.device.is_cuda()), gpu_(ctx.device) {
    if (m_.cache == "cold") flusher_ = std::make_unique<CacheFlusher>(ctx.device);
#ifdef RUNNER_WITH_CUDA
    if (holds_stream(m_, ctx.device)) hold_ = std::make_unique<StreamHold>();
#endif
  }

  std::int64_t hold_released_by_watchdog() const {
#ifdef RUNNER_WITH_CUDA
    if (hold_) return hold_->released_by_watchdog();
#endif
    return 0;
  }

  Repetition run(MeasureSummary& summary) {
    summary.warmup_steps = warm_up();
    Repetition rep;
    ScopedRange range("measure");
    const int limit = m_.adaptive() ? m_.max_steps : m_.measured_steps;
    // Steps whose marks are read together: one when each step synchronizes.
    const int batch = m_.sync_each_step ? 1
                                        : std::min(m_.adaptive() ? m_.min_steps : m_.measured_steps,
                                                   holds_stream(m_, ctx_.device) ? kMaxHeldSteps : INT_MAX);
    marks_.reset();
    marks_.reserve((marks_per_step_ ? marks_per_step_ : 16) * static_cast<size_t>(batch));
    ctx_.synchronize();
    const auto t0 = Clock::now();
    std::vector<StepMarks> pending;
    int n = 0;
    while (true) {
      if (pending.empty()) arm_hold();
      if (flusher_) flusher_->flush();
      ScopedRange r("step_" + std::to_string(n));
      MarkingTimer timer(marks_);
      const auto wall0 = Clock::now();
      step_(timer);
      hold_step_enqueued();
      if (m_.sync_each_step) ctx_.synchronize();
      timer.current.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - wall0).count();
      pending.push_back(std::move(timer.current));
      ++n;
      if (static_cast<int>(pending.size()) < batch && n < limit) continue;
      release_hold();
      ctx_.synchronize();
      for (const StepMarks& s : pending) collect(s, rep);
      pending.clear();
      marks_.reset();
      gpu_.sample(summary);
      rep.seconds = seconds_since(t0);
      if (stop(rep, n)) break;
    }
    if (!m_.sync_each_step) rep.ms.erase("wall");
    return rep;
  }

 private:
  // A batch is held from before its first step (its cache flush too) until all of it is
  // enqueued; warm-up steps are not held.
  void arm_hold() {
#ifdef RUNNER_WITH_CUDA
    if (hold_) hold_->arm();
#endif
  }
  void hold_step_enqueued() {
#ifdef RUNNER_WITH_CUDA
    if (hold_) hold_->step_enqueued();
#endif
  }
  void release_hold() {
#ifdef RUNNER_WITH_CUDA
    if (hold_) hold_->release();
#endif
  }

  // The steps it ran: warmup_steps, or more until warmup_seconds have passed.
  int warm_up() {
    ScopedRange range("warmup");
    const auto t0 = Clock::now();
    int i = 0;
    for (; i < m_.warmup_steps || (m_.warmup_seconds > 0 && seconds_since(t0) < m_.warmup_seconds); ++i) {
      if (flusher_) flusher_->flush();
      ScopedRange r("step_" + std::to_string(i));
      marks_.reset();
      MarkingTimer timer(marks_);
      step_(timer);
      ctx_.synchronize();
      marks_per_step_ = std::max(marks_per_step_, marks_.used());
    }
    return i;
  }

  void collect(const StepMarks& s, Repetition& rep) {
    for (const PhaseMark& p : s.phases) {
      if (!rep.ms.count(p.name)) rep.order.push_back(p.name);
      rep.ms[p.name].push_back(marks_.ms(p.start, p.end));
    }
    const double step_ms = s.phases.empty() ? 0.0 : marks_.ms(s.phases.front().start, s.phases.back().end);
    rep.ms["step"].push_back(step_ms);
    rep.ms["wall"].push_back(s.wall_ms);
  }

  bool stop(Repetition& rep, int n) {
    if (!m_.adaptive()) {
      rep.stop_reason = "fixed";
      return n >= m_.measured_steps;
    }
    rep.target_met = n >= m_.min_steps && rel_stderr(rep.ms["step"]) <= m_.target_rel_stderr;
    if (rep.target_met) rep.stop_reason = "target";
    else if (n >= m_.max_steps) rep.stop_reason = "max_steps";
    // Two steps at least, so even a time-limited point has a noise estimate.
    else if (rep.seconds >= m_.max_seconds && n >= 2) rep.stop_reason = "max_seconds";
    else return false;
    return true;
  }

  Context& ctx_;
  const MeasureSettings& m_;
  const std::function<void(StepTimer&)>& step_;
  Marks marks_;
  GpuWatch gpu_;
  std::unique_ptr<CacheFlusher> flusher_;
  size_t marks_per_step_ = 0;  // the most marks a warm-up step used
#ifdef RUNNER_WITH_CUDA
  // Declared last, destroyed first: when a step throws mid-batch, the stream is
  // released (and passes its wait) before the rest of the loop goes.
  std::unique_ptr<StreamHold> hold_;
#endif
};

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

double rel_stderr(const std::vector<double>& samples) { return Stats::of(samples).rel_stderr(); }

Stats PhaseTimes::stats_of(const std::vector<double>& per_step) const {
  Stats s = Stats::of(per_step);
  if (repetition_steps.size() < 2) return s;
  size_t at = 0;
  for (const std::int64_t count : repetition_steps) {
    const size_t end = std::min(per_step.size(), at + static_cast<size_t>(count));
    s.repetition_means.push_back(mean_of(std::vector<double>(per_step.begin() + at, per_step.begin() + end)));
    at = end;
  }
  return s;
}

void PhaseTimes::record(Record& r, const StepWork& work, const std::string& rate_phase) const {
  for (const std::string& phase : order) r.add(phase + "_ms", stats(phase), "ms");
  record_rates(r, work, rate_phase);
}

void PhaseTimes::record_rates(Record& r, const StepWork& work, const std::string& phase) const {
  const std::vector<double>& times = ms.at(phase);
  auto rate = [&](double amount, double scale) {
    std::vector<double> out;
    for (double t : times) out.push_back(t > 0 ? amount / (t * 1e-3) / scale : 0.0);
    return stats_of(out);
  };
  if (work.items > 0) r.add(work.item_name + "_per_s", rate(work.items, 1.0), work.item_name + "/s");
  if (work.flop > 0) r.add("tflops", rate(work.flop, 1e12), "TFLOP/s");
  if (work.bytes > 0) r.add("gbps", rate(work.bytes, 1e9), "GB/s");
}

PhaseTimes measure_steps(Context& ctx, const std::function<void(StepTimer&)>& step) {
  const MeasureSettings& m = ctx.measure;
  validate(m);
  MeasureSummary summary;
  summary.mode = m.adaptive() ? "adaptive" : "fixed";
  summary.cache = m.cache;
  summary.warmup_seconds = m.warmup_seconds;
  summary.hold_stream = holds_stream(m, ctx.device);
  summary.repetitions = m.repetitions;
  summary.target_rel_stderr = m.target_rel_stderr;
  Loop loop(ctx, step);
  PhaseTimes out;
  for (int i = 0; i < m.repetitions; ++i) {
    ScopedRange range("repetition_" + std::to_string(i));
    Repetition rep = loop.run(summary);
    for (const std::string& name : rep.order)
      if (!out.ms.count(name)) out.order.push_back(name);
    for (auto& [name, values] : rep.ms) out.ms[name].insert(out.ms[name].end(), values.begin(), values.end());
    out.repetition_steps.push_back(static_cast<std::int64_t>(rep.ms["step"].size()));
    summary.target_met = summary.target_met && rep.target_met;
    summary.stop_reason = rep.stop_reason;
    summary.measured_seconds += rep.seconds;
  }
  out.order.push_back("step");
  if (m.sync_each_step) out.order.push_back("wall");
  summary.n = static_cast<std::int64_t>(out.ms["step"].size());
  summary.rel_stderr = rel_stderr(out.ms["step"]);
  summary.hold_released_by_watchdog = loop.hold_released_by_watchdog();
  if (!m.adaptive()) summary.target_met = true;
  out.summary = summary;
  ctx.measurements.push_back(summary);
  return out;
}

}  // namespace runner
