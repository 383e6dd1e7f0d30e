// One optimizer step over a model plugin's parameters, alone: the bandwidth-bound
// part of a train step (fused_adamw experiment). Gradients are random (fixed per
// point, reused every step), so no forward or backward runs. Reports the time per
// step, the bytes an AdamW-style step must move (bytes_per_param x parameters), the
// bandwidth that implies, and the time at `floor_bandwidth_gbs` (the roofline floor).
#include <ATen/ATen.h>

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

class OptimizerStep : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const double bytes_per_param = p.number("bytes_per_param");
    const double floor_gbs = p.number("floor_bandwidth_gbs");
    if (bytes_per_param <= 0 || floor_gbs <= 0)
      throw std::invalid_argument("optimizer_step: bytes_per_param and floor_bandwidth_gbs must be > 0");
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
      runner::opt_float("floor_bandwidth_gbs", 3000.0, "bandwidth for floor_ms (H100 SXM: ~3000 GB/s achievable)"),
  };
  // "?": wall_ms with measure.sync_each_step, peak memory on devices with memory stats.
  m.metrics = std::vector<std::string>{"optimizer_ms", "step_ms",  "wall_ms?", "gbps", "parameters",
                                       "bytes_moved", "floor_ms", "peak_memory_gib?"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<OptimizerStep>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
