// One training step of a model plugin, timed by phase (benchmarking_script,
// benchmarking_mixed_precision (c), and the C++ side of train_step_vs_pytorch).
//
//   forward   = model forward + loss, inside AutocastScope(ctx.precision)
//   backward  = zero_grad(set_to_none) + loss.backward(), outside autocast (as in PyTorch)
//   optimizer = optimizer step
// `mode` picks the phases: forward (under NoGradGuard: inference), forward_backward,
// train_step (all three). The batch is drawn once and reused every step.
//
// Data parallel (`ddp` other than none, 2+ ranks): batch_size is the global batch;
// every rank draws the same global batch and trains on its slice. backward then
// also runs ddp zero_grad / prepare_for_backward, and a `communication` phase
// (finish_gradient_synchronization) sits between backward and optimizer: its time
// is the communication left exposed after backward. collective_ms is the summed
// duration of the step's collectives as measured by the ddp plugin (CUDA events on
// NCCL's stream), overlapped or not.
//
// memory_breakdown: before timing, records the memory at three moments (labels
// moment=after_init | before_step | after_step) split into parameters, gradients,
// optimizer state and other (everything else the allocator holds: activations,
// buffers, communication buckets beyond gradients), with the peak since the
// previous moment. before_step/after_step belong to the second step, when the
// optimizer state exists.
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

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/cuda_graph.hpp"
#include "runner/ddp.hpp"
#include "runner/device.hpp"
#include "runner/measure.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/task.hpp"

namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
// Eager data-parallel steps before capture, as PyTorch's CUDA-graph notes ask of DDP
// (11): they create the communicators and let every lazily built buffer exist.
constexpr int kDdpEagerSteps = 11;

// Bytes of the storages behind `tensors`, each storage once (gradient views into
// one bucket count the bucket once).
std::int64_t storage_bytes(const std::vector<torch::Tensor>& tensors) {
  std::vector<const void*> seen;
  std::int64_t bytes = 0;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    const void* key = t.storage().data();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    bytes += static_cast<std::int64_t>(t.storage().nbytes());
  }
  return bytes;
}

void emit_memory_moment(const std::string& moment, runner::Context& ctx, torch::nn::Module& module,
                        const runner::Optimizer* optimizer, runner::Recorder& out) {
  ctx.synchronize();
  std::vector<torch::Tensor> params, grads;
  for (const auto& p : module.parameters()) {
    params.push_back(p);
    grads.push_back(p.grad());
  }
  const double param_bytes = static_cast<double>(storage_bytes(params));
  const double grad_bytes = static_cast<double>(storage_bytes(grads));
  const double state_bytes = optimizer ? static_cast<double>(optimizer->state_bytes()) : 0.0;
  runner::Record r;
  r.label("moment", moment);
  r.add("parameters_gib", param_bytes / kBytesPerGiB, "GiB");
  r.add("gradients_gib", grad_bytes / kBytesPerGiB, "GiB");
  r.add("optimizer_state_gib", state_bytes / kBytesPerGiB, "GiB");
  if (const auto mem = runner::device_memory(ctx.device)) {
    const double allocated = static_cast<double>(mem->allocated_bytes);
    r.add("other_gib", (allocated - param_bytes - grad_bytes - state_bytes) / kBytesPerGiB, "GiB");
    r.add("allocated_gib", allocated / kBytesPerGiB, "GiB");
    r.add("peak_gib", static_cast<double>(mem->peak_allocated_bytes) / kBytesPerGiB, "GiB");
  }
  out.emit(std::move(r));
  runner::reset_peak_memory(ctx.device);
}

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
    const bool data_parallel = p.plugin("ddp").plugin_name() != "none";
    const int ranks = data_parallel ? ctx.dist.world_size : 1;
    if (data_parallel && !backward) throw std::invalid_argument("train_step: ddp needs mode forward_backward or train_step");
    if (batch_size % ranks != 0)
      throw std::invalid_argument("train_step: batch_size " + std::to_string(batch_size) + " does not split over " +
                                  std::to_string(ranks) + " ranks");

    // Start every point from an empty caching allocator, as a fresh process would:
    // blocks cached by the previous point would hide allocator growth (warm-up 0)
    // and can fragment memory for a larger model.
    runner::release_cached_memory(ctx.device);
    auto model = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    torch::nn::Module& module = model->module();
    // cuda_graph on a CPU device runs eagerly, so one experiment file serves both.
    const bool graphed = p.flag("cuda_graph") && ctx.device.is_cuda();
    std::unique_ptr<runner::DataParallel> ddp;
    if (data_parallel) {
      ddp = ctx.create<runner::DataParallel>(runner::PluginKind::Ddp, p.plugin("ddp"));
      ddp->attach(module, ctx);
    }
    std::unique_ptr<runner::OptimizerFactory> factory;
    std::unique_ptr<runner::Optimizer> optimizer;
    if (optimize) {
      factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, p.plugin("optimizer"));
      if (graphed && !factory->supports_graph_capture())
        throw std::invalid_argument("train_step: cuda_graph: true needs an optimizer whose step can be captured; "
                                    "use optimizer: {name: adamw, impl: fused}");
      optimizer = factory->build({torch::optim::OptimizerParamGroup(module.parameters())});
    }
    torch::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    runner::Batch batch = model->random_batch(batch_size, gen);
    const double global_tokens = static_cast<double>(batch.targets.numel());
    if (ranks > 1) {
      const std::int64_t local = batch_size / ranks;
      batch.inputs = batch.inputs.narrow(0, ctx.dist.rank * local, local).contiguous();
      batch.targets = batch.targets.narrow(0, ctx.dist.rank * local, local).contiguous();
    }

    // Inference mode for forward-only points: no graph is kept, as in a real eval.
    std::optional<torch::NoGradGuard> no_grad;
    if (!backward) no_grad.emplace();

    torch::Tensor loss, first_loss;
    std::vector<double> collective_ms;  // per step, warm-up included
    int steps_run = 0;
    auto collect_communication = [&] {
      if (!ddp || graphed) return;  // captured collectives have no per-step timing
      if (!ctx.measure.sync_each_step) ctx.synchronize();
      collective_ms.push_back(ddp->take_communication().collective_ms);
    };
    auto forward = [&] {
      runner::AutocastScope autocast(ctx.device, ctx.precision);
      loss = model->loss(model->forward(batch.inputs), batch.targets);
    };
    auto run_backward = [&] {
      if (ddp) {
        ddp->zero_grad(module);
        ddp->prepare_for_backward();
      } else {
        module.zero_grad(/*set_to_none=*/true);
      }
      loss.backward();
    };
    auto step = [&](runner::StepTimer& t) {
      if (steps_run++ > 0) collect_communication();
      t.phase("forward", forward);
      if (!first_loss.defined()) first_loss = loss.detach();
      if (backward) t.phase("backward", run_backward);
      if (backward && ddp) t.phase("communication", [&] { ddp->finish_gradient_synchronization(); });
      if (optimize) t.phase("optimizer", [&] { optimizer->step(); });
    };

    if (p.flag("memory_breakdown")) {
      emit_memory_moment("after_init", ctx, module, optimizer.get(), out);
      for (int i = 0; i < 2; ++i) {
        forward();
        if (backward) run_backward();
        if (backward && ddp) ddp->finish_gradient_synchronization();
        if (i == 1) emit_memory_moment("before_step", ctx, module, optimizer.get(), out);
        if (optimize) optimizer->step();
        if (i == 1) emit_memory_moment("after_step", ctx, module, optimizer.get(), out);
      }
      if (ddp) {
        ctx.synchronize();
        ddp->take_communication();
      }
    }

    // With cuda_graph the whole step is one phase, "graph" (one replay). With a ddp
    // strategy the graph holds its collectives too: zero_grad (a bucketed strategy
    // zeroes its buckets in the graph), backward with the hooks' all-reduces, the wait
    // for them, and the optimizer step; every rank replays the same graph.
    std::unique_ptr<runner::CudaGraphStep> graph;
    if (graphed) {
      if (ctx.measure.warmup_steps < 1)
        throw std::invalid_argument("train_step: cuda_graph: true needs measure.warmup_steps >= 1 (capture happens there)");
      graph = std::make_unique<runner::CudaGraphStep>(ctx.device, /*eager_steps=*/ddp ? kDdpEagerSteps : 2, "train_step");
    }
    auto prepare = [&] {
      // Before each eager step and the capture: the eager steps' timed collectives hold
      // the tensors they reduced (c10d's Work) until the clock takes them, and a graph's
      // steps are never taken per step; take them here, or the gradients of every eager
      // step stay allocated (naive, flat and overlap reduce fresh gradient tensors).
      if (ddp) {
        ctx.synchronize();
        ddp->take_communication();
      }
      if (!backward) return;
      if (ddp) {
        ddp->zero_grad(module);
      } else {
        module.zero_grad(/*set_to_none=*/true);
      }
    };
    auto body = [&] {
      if (backward && ddp) {
        ddp->zero_grad(module);
        ddp->prepare_for_backward();
      }
      {
        runner::AutocastScope autocast(ctx.device, ctx.precision);
        loss = model->loss(model->forward(batch.inputs), batch.targets);
      }
      if (!first_loss.defined()) first_loss = loss.detach().clone();
      if (backward) loss.backward();
      if (backward && ddp) ddp->finish_gradient_synchronization();
      if (optimize) optimizer->step();
    };
    auto graph_step = [&](runner::StepTimer& t) { t.phase("graph", [&] { graph->run(prepare, body); }); };

    runner::reset_peak_memory(ctx.device);
    const runner::PhaseTimes times = graphed ? runner::measure_steps(ctx, graph_step) : runner::measure_steps(ctx, step);
    ctx.synchronize();
    collect_communication();
    const std::optional<runner::DeviceMemory> memory = runner::device_memory(ctx.device);

    runner::Record r;
    runner::StepWork work;  // the host derives tokens_per_s from it, per step
    work.items = global_tokens;  // the whole (global) batch per step
    work.item_name = "tokens";
    times.record(r, work);
    r.add("parameters", static_cast<double>(parameter_count(module)), "count");
    if (ddp && !graphed) {
      const size_t measured = times.ms.at("step").size();
      const std::vector<double> measured_collective_ms(collective_ms.end() - static_cast<std::ptrdiff_t>(measured),
                                                       collective_ms.end());
      // (with repetitions > 1 the last steps' values: warm-up steps of later repetitions interleave)
      const runner::Stats collective = runner::Stats::of(measured_collective_ms);
      const runner::Stats step_stats = times.stats("step");
      const runner::Stats exposed = times.stats("communication");
      r.add("collective_ms", collective, "ms");
      r.add("comm_share", collective.mean / step_stats.mean, "fraction");
      r.add("exposed_comm_share", exposed.mean / step_stats.mean, "fraction");
    }
    if (ddp) {
      r.add("world_size", static_cast<double>(ranks), "count");
      ddp->report(r);
    }
    if (optimizer) r.add("optimizer_state_gib", static_cast<double>(optimizer->state_bytes()) / kBytesPerGiB, "GiB");
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
      runner::opt_plugin("optimizer", runner::PluginKind::Optimizer, "adamw",
                         "used in mode train_step; sharded wraps another for optimizer-state sharding"),
      runner::opt_plugin("ddp", runner::PluginKind::Ddp, "none",
                         "data-parallel strategy over the run's ranks (naive, flat, overlap, bucketed), or none"),
      runner::opt_bool("memory_breakdown", false,
                       "also record memory by category after init and before/after an optimizer step"),
      runner::opt_int("batch_size", 4, "examples per (global) batch; one random batch, reused every step"),
      runner::opt_enum("mode", {"forward", "forward_backward", "train_step"}, "train_step",
                       "phases to run: forward (no grad), + backward, + optimizer step"),
      runner::opt_bool("cuda_graph", false,
                       "capture the whole step (forward, backward with the ddp strategy's collectives, optimizer) "
                       "in one CUDA graph and replay it; one phase 'graph'; needs a capturable optimizer "
                       "(adamw impl: fused); ignored on CPU"),
  };
  // The step's record (phases by mode; with ddp also its strategy's metrics, which that
  // plugin declares), and with memory_breakdown one record per `moment`. Conditions say
  // which points record each (a point without one is invalid); "?": some points, by
  // device (graph_ms and memory: CUDA only) or measure settings (wall_ms: sync_each_step).
  const std::string eager = " and cuda_graph=false";
  m.metrics = std::vector<std::string>{
      "forward_ms if cuda_graph=false", "backward_ms if mode!=forward" + eager,
      "communication_ms if ddp!=none" + eager, "optimizer_ms if mode=train_step" + eager, "graph_ms?", "step_ms",
      "wall_ms?", "tokens_per_s", "parameters", "collective_ms if ddp!=none" + eager,
      "comm_share if ddp!=none" + eager, "exposed_comm_share if ddp!=none" + eager, "world_size if ddp!=none",
      "optimizer_state_gib if mode=train_step", "peak_memory_bytes?", "peak_memory_gib?", "loss_first", "loss_last",
      "parameters_gib if memory_breakdown=true", "gradients_gib if memory_breakdown=true", "other_gib?",
      "allocated_gib?", "peak_gib?"};
  m.labels = std::vector<std::string>{"moment"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<TrainStep>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
