// One training step of a model plugin, timed by phase (benchmarking_script,
// benchmarking_mixed_precision (c), and the C++ side of train_step_vs_pytorch).
//
//   forward   = model forward + loss, inside AutocastScope(ctx.precision)
//   backward  = zero_grad(set_to_none) + loss.backward(), outside autocast (as in PyTorch)
//   optimizer = optimizer step
// `mode` picks the phases: forward (under NoGradGuard: inference), forward_backward,
// train_step (all three). The batch is drawn once and reused every step.
//
// NVTX ranges in a Nsight Systems trace of one point, outermost first:
//   warmup | measure                      (runner::measure_steps)
//     step_<i>                            (one per step, numbered within warmup/measure)
//       forward | backward | optimizer    (this task's phases)
//         embedding, layer<i> (attention, feed_forward inside), final_norm, lm_head
//                                         (model/transformer_lm, forward only; the
//                                          attention plugin adds its own steps inside)
#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_graph_step.hpp"
#include "runner/device.hpp"
#include "runner/measure.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/task.hpp"

namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

std::int64_t parameter_count(torch::nn::Module& module) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

class TrainStep : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::string mode = p.text("mode");
    const bool backward = mode != "forward";
    const bool optimize = mode == "train_step";
    const std::int64_t batch_size = p.integer("batch_size");
    if (batch_size < 1) throw std::invalid_argument("train_step: batch_size must be >= 1");

    // Start every point from an empty caching allocator, as a fresh process would:
    // blocks cached by the previous point would hide allocator growth (warm-up 0)
    // and can fragment memory for a larger model.
    runner::release_cached_memory(ctx.device);
    auto model = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    torch::nn::Module& module = model->module();
    // cuda_graph on a CPU device runs eagerly, so one experiment file serves both.
    const bool graphed = p.flag("cuda_graph") && ctx.device.is_cuda();
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (optimize) {
      auto factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, p.plugin("optimizer"));
      if (graphed && !factory->supports_graph_capture())
        throw std::invalid_argument("train_step: cuda_graph: true needs an optimizer whose step can be captured; "
                                    "use optimizer: {name: adamw, impl: fused}");
      optimizer = factory->make({torch::optim::OptimizerParamGroup(module.parameters())});
    }
    torch::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    const runner::Batch batch = model->random_batch(batch_size, gen);

    // Inference mode for forward-only points: no graph is kept, as in a real eval.
    std::optional<torch::NoGradGuard> no_grad;
    if (!backward) no_grad.emplace();

    torch::Tensor loss, first_loss;
    auto step = [&](runner::StepTimer& t) {
      t.phase("forward", [&] {
        runner::AutocastScope autocast(ctx.device, ctx.precision);
        loss = model->loss(model->forward(batch.inputs), batch.targets);
      });
      if (!first_loss.defined()) first_loss = loss.detach();
      if (backward) {
        t.phase("backward", [&] {
          module.zero_grad(/*set_to_none=*/true);
          loss.backward();
        });
      }
      if (optimize) t.phase("optimizer", [&] { optimizer->step(); });
    };

    // With cuda_graph the whole step is one phase, "graph" (one replay).
    std::unique_ptr<plugins::train_step::CudaGraphStep> graph;
    if (graphed) {
      if (ctx.measure.warmup_steps < 1)
        throw std::invalid_argument("train_step: cuda_graph: true needs measure.warmup_steps >= 1 (capture happens there)");
      graph = std::make_unique<plugins::train_step::CudaGraphStep>(ctx.device, /*eager_steps=*/2);
    }
    auto prepare = [&] {
      if (backward) module.zero_grad(/*set_to_none=*/true);
    };
    auto body = [&] {
      {
        runner::AutocastScope autocast(ctx.device, ctx.precision);
        loss = model->loss(model->forward(batch.inputs), batch.targets);
      }
      if (!first_loss.defined()) first_loss = loss.detach().clone();
      if (backward) loss.backward();
      if (optimize) optimizer->step();
    };
    auto graph_step = [&](runner::StepTimer& t) { t.phase("graph", [&] { graph->run(prepare, body); }); };

    runner::reset_peak_memory(ctx.device);
    const runner::PhaseTimes times = graphed ? runner::measure_steps(ctx, graph_step) : runner::measure_steps(ctx, step);
    const std::optional<runner::DeviceMemory> memory = runner::device_memory(ctx.device);

    runner::Record r;
    runner::StepWork work;  // the host derives tokens_per_s from it, per step
    work.items = static_cast<double>(batch.targets.numel());
    work.item_name = "tokens";
    times.record(r, work);
    r.add("parameters", static_cast<double>(parameter_count(module)), "count");
    if (memory) {
      r.add("peak_memory_bytes", static_cast<double>(memory->peak_allocated_bytes), "bytes");
      r.add("peak_memory_gib", static_cast<double>(memory->peak_allocated_bytes) / kBytesPerGiB, "GiB");
    }
    // Sanity: a train step on a fixed batch must lower the loss; NaN shows fp16 overflow.
    r.add("loss_first", first_loss.item<double>(), "");
    r.add("loss_last", loss.detach().item<double>(), "");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "train_step";
  m.version = "1";
  m.description = "forward / backward / optimizer step of a model, timed per phase, with peak memory";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "transformer_lm", "the model under test"),
      runner::opt_plugin("optimizer", runner::PluginKind::Optimizer, "adamw", "used in mode train_step"),
      runner::opt_int("batch_size", 4, "examples per batch (one random batch, reused every step)"),
      runner::opt_enum("mode", {"forward", "forward_backward", "train_step"}, "train_step",
                       "phases to run: forward (no grad), + backward, + optimizer step"),
      runner::opt_bool("cuda_graph", false,
                       "capture the whole step (forward, backward, optimizer) in one CUDA graph and replay it; "
                       "one phase 'graph'; needs a capturable optimizer (adamw impl: fused); ignored on CPU"),
  };
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<TrainStep>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
