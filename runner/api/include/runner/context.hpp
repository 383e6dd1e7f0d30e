// What a plugin sees of the run: device, precision policy, seed, where to write,
// a logger, the measurement settings, a way to create other plugins, and (for
// multi-process runs) rank, world size and process group.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include "runner/plugin.hpp"

namespace c10d { class ProcessGroup; }

namespace runner {

// How a point is measured (the experiment's `measure:`); measure.hpp has the loop.
struct MeasureSettings {
  int warmup_steps = 5;
  // Warm-up also lasts at least this long: an idle GPU's clocks take tens of ms to ramp up,
  // which a few steps of a 0.1 ms kernel do not cover (triton's do_bench warms up 25 ms).
  double warmup_seconds = 0;
  int measured_steps = 10;        // the fixed count, when target_rel_stderr is 0
  double target_rel_stderr = 0;   // > 0: adaptive stopping
  int min_steps = 10;             // adaptive: never fewer
  int max_steps = 1000;           // adaptive: never more
  double max_seconds = 60;        // adaptive: stop once measured steps took this long
  int repetitions = 1;            // warm-up + measurement, this many times
  // Synchronize the device after every step; when false, events are read in
  // batches (all steps in fixed mode, min_steps at a time in adaptive mode).
  bool sync_each_step = true;
  // CUDA, without sync_each_step: hold the stream behind a wait on a host flag while a
  // batch of steps is enqueued, then release it, so the host's launch gaps of short steps
  // do not land between their events (nvbench's blocking kernel). measure.cpp has how.
  bool hold_stream = false;
  std::string cache = "warm";     // warm | cold: write a buffer larger than L2 before every step
  bool adaptive() const { return target_rel_stderr > 0; }
};

// How one measure_steps call went; the host adds it to the point's records.
struct MeasureSummary {
  std::string mode;           // fixed | adaptive
  std::string cache;          // warm | cold
  int repetitions = 1;
  std::int64_t n = 0;         // measured steps, all repetitions
  double rel_stderr = 0;      // of the mean step time over all measured steps
  double target_rel_stderr = 0;
  bool target_met = true;     // every repetition reached the target (fixed: true)
  std::string stop_reason;    // fixed | target | max_steps | max_seconds (the last repetition's)
  double warmup_seconds = 0;  // as asked
  int warmup_steps = 0;       // warm-up steps run, the last repetition's (more than asked with warmup_seconds)
  // Steps were held (hold_stream asked, on a CUDA device, without sync_each_step); false
  // where it was asked but nothing could be held (CPU).
  bool hold_stream = false;
  // Holds the watchdog released because no step was enqueued for 250 ms (a step that
  // synchronizes, or a full launch queue): those batches' steps include host gaps.
  std::int64_t hold_released_by_watchdog = 0;
  double measured_seconds = 0;
  // GPU state sampled while measuring (at synchronize points, at most every 50 ms).
  int gpu_samples = 0;
  unsigned min_sm_clock_mhz = 0, max_sm_clock_mhz = 0;
  unsigned max_temperature_c = 0;
  double max_power_w = 0;
  std::uint64_t throttle_reasons = 0;  // OR of all samples
};

// fp32: plain float32 (tf32 off). tf32: float32 with TF32 matmuls.
// bf16 / fp16: float32 weights, autocast to that dtype (PyTorch's op lists).
struct Precision {
  std::string name = "fp32";
  std::optional<c10::ScalarType> autocast;
  bool allow_tf32 = false;
  static Precision parse(const std::string& name);  // throws on unknown names
};

// Enables the precision's autocast (and TF32 setting) for its lifetime.
class AutocastScope {
 public:
  AutocastScope(const c10::Device& device, const Precision& precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool enabled_ = false;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::Float;
  bool prev_tf32_ = false;
};

class Logger {
 public:
  virtual ~Logger();
  virtual void info(const std::string& line) = 0;
  virtual void warn(const std::string& line) = 0;
};

class PluginFactory {
 public:
  virtual ~PluginFactory();
  virtual std::unique_ptr<PluginBase> create(PluginKind kind, const Params& params,
                                             Context& ctx) const = 0;
  // The plugin's declared facts (PluginManifest::facts); throws when it declares none.
  virtual std::map<std::string, double> facts(PluginKind kind, const Params& params) const;
};

// This process's place in a multi-process run (runner launch, torchrun, srun).
// `group` dispatches by tensor device: CPU tensors go through Gloo, CUDA tensors
// through NCCL (CUDA runs only), as torch.distributed's "cpu:gloo,cuda:nccl".
// Include <torch/csrc/distributed/c10d/ProcessGroup.hpp> to call collectives.
// ctx.seed is the same on every rank (identical initial weights, one global
// batch); use rank_seed() for randomness that must differ between ranks.
struct Distributed {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string backend;  // "gloo" (CPU run) or "nccl" (CUDA run); empty when single-process
  c10::intrusive_ptr<c10d::ProcessGroup> group;  // null in single-process runs

  Distributed();
  Distributed(const Distributed&);
  Distributed& operator=(const Distributed&);
  ~Distributed();
  bool active() const { return world_size > 1; }
  std::uint64_t rank_seed(std::uint64_t seed) const { return seed + 1000003ULL * static_cast<std::uint64_t>(rank); }
};

class Context {
 public:
  c10::Device device{c10::kCPU};
  Precision precision;
  std::uint64_t seed = 0;
  std::filesystem::path run_dir;       // runs/<experiment>/<timestamp>
  std::filesystem::path artifact_dir;  // run_dir/artifacts/<part>-<point>, created on demand
  std::string point_name;              // "<part>-<index>", for artifact names
  MeasureSettings measure;
  // One summary per measure_steps call of this point (a task that measures in
  // another process adds its own); the host stores them with the records.
  std::vector<MeasureSummary> measurements;
  Logger* log = nullptr;
  const PluginFactory* plugins = nullptr;
  Distributed dist;

  bool is_cuda() const { return device.is_cuda(); }
  // Creates a nested plugin from its resolved options; throws if it is not a T.
  template <class T>
  std::unique_ptr<T> create(PluginKind kind, const Params& params) {
    if (plugins == nullptr)
      throw std::runtime_error("cannot create " + std::string(to_string(kind)) + " plugin '" + params.plugin_name() +
                               "': this Context has no plugin factory (set Context::plugins)");
    std::unique_ptr<PluginBase> base = plugins->create(kind, params, *this);
    T* typed = dynamic_cast<T*>(base.get());
    if (typed == nullptr) throw std::runtime_error("plugin '" + params.plugin_name() + "' is not a " + to_string(kind));
    base.release();
    return std::unique_ptr<T>(typed);
  }
  // What a plugin declares about itself from `params` alone (PluginManifest::facts),
  // e.g. a model's dimensions, so a task needs no other plugin's headers.
  std::map<std::string, double> facts(PluginKind kind, const Params& params) const;
  // Creates artifact_dir if needed and returns artifact_dir / file_name.
  std::filesystem::path artifact_path(const std::string& file_name) const;
  void synchronize() const;  // waits for the device (no-op on CPU)
};

}  // namespace runner
