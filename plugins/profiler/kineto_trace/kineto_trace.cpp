// profiler/kineto_trace: a Chrome trace (chrome://tracing, Perfetto) of the
// measured steps, from LibTorch's own profiler (Kineto: CPU ops and, on CUDA,
// every kernel on every stream via CUPTI, NCCL's included). Profiling starts when
// the `measure` range opens (after warm-up, so no first-call costs) and stops
// when it closes; keep measured_steps small, a step of a large model is
// thousands of events. The trace is the point's artifact trace.json.
#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <memory>
#include <set>

#include "runner/context.hpp"
#include "runner/profiler.hpp"
#include "runner/record.hpp"

namespace {

namespace prof = torch::profiler::impl;

class KinetoTrace : public runner::Profiler {
 public:
  void point_begin(runner::Context& ctx) override {
    ctx_ = &ctx;
    activities_ = {prof::ActivityType::CPU};
    if (ctx.is_cuda()) activities_.insert(prof::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config(), activities_);
  }

  void range_push(const std::string& name) override {
    if (name == "measure" && !active_ && !done_) {
      torch::autograd::profiler::enableProfiler(config(), activities_);
      active_ = true;
    }
  }

  void range_pop(const std::string& name) override {
    if (name == "measure" && active_) stop();
  }

  void point_end(runner::Context& ctx, runner::Record& summary) override {
    if (active_) stop();
    if (!trace_) return;
    const std::filesystem::path file = ctx.artifact_path("trace.json");
    trace_->save(file.string());
    summary.artifacts.push_back(std::filesystem::relative(file, ctx.run_dir).string());
    trace_.reset();
  }

 private:
  static prof::ProfilerConfig config() { return prof::ProfilerConfig(prof::ProfilerState::KINETO); }

  void stop() {
    if (ctx_ != nullptr) ctx_->synchronize();  // kernels of the last step belong in the trace
    trace_ = torch::autograd::profiler::disableProfiler();
    active_ = false;
    done_ = true;
  }

  runner::Context* ctx_ = nullptr;
  std::set<prof::ActivityType> activities_;
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> trace_;
  bool active_ = false, done_ = false;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Profiler;
  m.name = "kineto_trace";
  m.version = "1";
  m.description = "Chrome trace of the measured steps from LibTorch's Kineto profiler (CPU ops, CUDA kernels)";
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<KinetoTrace>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
