// One optimizer step over a model plugin's parameters, alone: the bandwidth-bound
// part of a train step (fused_adamw experiment). Gradients are random (fixed per
// point, reused every step), so no forward or backward runs. Reports the time per
// step, the bytes an AdamW-style step must move (bytes_per_param x parameters), the
// bandwidth that implies, and the time that many bytes take at the device's copy
// bandwidth (the roofline floor): measured on the same device in the same point
// (copy_gbps), or a declared `floor_bandwidth_gbs`.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/device.hpp"
#include "runner/measure.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/task.hpp"

namespace {

// Device-to-device copy bandwidth (read + write bytes per second), the best of `reps`
// copies of a `bytes`-sized buffer: what a bandwidth-bound kernel on this device can
// reach, so the floor moves with the card (an H100 and an H200 differ by 1.4x).
double copy_bandwidth_gbs(const runner::Context& ctx, double bytes, int reps) {
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  auto src = at::empty({n}, at::TensorOptions().dtype(at::kFloat).device(ctx.device)).fill_(1.0f);
  auto dst = at::empty_like(src);
  dst.copy_(src);  // warm-up: first-touch and clocks
  ctx.synchronize();
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    dst.copy_(src);
    ctx.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(n) * sizeof(float) / s / 1e9);
  }
  return best;
}

class OptimizerStep : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const double bytes_per_param = p.number("bytes_per_param");
    if (bytes_per_param <= 0) throw std::invalid_argument("optimizer_step: bytes_per_param must be > 0");
    runner::release_cached_memory(ctx.device);
    auto model = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    std::vector<torch::Tensor> params = model->module().parameters();
    const at::ScalarType grad_dtype = p.text("grad_dtype") == "bf16"   ? at::kBFloat16
                                      : p.text("grad_dtype") == "fp16" ? at::kHalf
                                                                       : at::kFloat;
    torch::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    double count = 0;
    for (auto& param : params) {
      param.mutable_grad() = (at::randn(param.sizes(), gen, param.options()) * 1e-2).to(grad_dtype);
      count += static_cast<double>(param.numel());
    }
    auto factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, p.plugin("optimizer"));
    auto optimizer = factory->make({torch::optim::OptimizerParamGroup(params)});

    // Before the optimizer's state exists, so the copy buffers fit beside the model.
    const double declared_gbs = p.number("floor_bandwidth_gbs");
    const double floor_gbs = declared_gbs > 0 ? declared_gbs
                                              : copy_bandwidth_gbs(ctx, p.number("copy_mib") * 1024 * 1024, 20);
    runner::release_cached_memory(ctx.device);
    runner::reset_peak_memory(ctx.device);
    const runner::PhaseTimes times =
        runner::measure_steps(ctx, [&](runner::StepTimer& t) { t.phase("optimizer", [&] { optimizer->step(); }); });

    runner::Record r;
    const double bytes = bytes_per_param * count;
    runner::StepWork work;  // the host derives "gbps" (bytes / optimizer time) per step
    work.bytes = bytes;
    times.record(r, work, "optimizer");
    r.add("parameters", count, "count");
    r.add("bytes_moved", bytes, "bytes");
    r.add("floor_ms", bytes / (floor_gbs * 1e9) * 1e3, "ms");
    r.add("floor_gbps", floor_gbs, "GB/s");
    if (auto memory = runner::device_memory(ctx.device))
      r.add("peak_memory_gib", static_cast<double>(memory->peak_allocated_bytes) / (1024.0 * 1024.0 * 1024.0), "GiB");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "optimizer_step";
  m.version = "1";
  m.description = "one optimizer step over a model's parameters with random gradients: time, bandwidth, floor";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "transformer_lm", "whose parameters to update"),
      runner::opt_plugin("optimizer", runner::PluginKind::Optimizer, "adamw", "the optimizer under test"),
      runner::opt_enum("grad_dtype", {"fp32", "bf16", "fp16"}, "fp32", "dtype of the random gradients"),
      runner::opt_float("bytes_per_param", 28.0,
                        "bytes a step must move per parameter (AdamW, fp32 grads: read p, g, m, v, write p, m, v)"),
      runner::opt_float("floor_bandwidth_gbs", 0.0,
                        "bandwidth for floor_ms in GB/s; 0: measure this device's copy bandwidth (floor_gbps)")
          .at_least(0),
      runner::opt_float("copy_mib", 1024.0, "buffer copied to measure the copy bandwidth (MiB)").at_least(1),
  };
  // "?": wall_ms with measure.sync_each_step, peak memory on devices with memory stats.
  m.metrics = std::vector<std::string>{"optimizer_ms", "step_ms",  "wall_ms?", "gbps", "parameters",
                                       "bytes_moved", "floor_ms", "floor_gbps", "peak_memory_gib?"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<OptimizerStep>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
