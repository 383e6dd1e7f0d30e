// Proof that data-parallel training equals single-process training: every rank
// trains `model` for `steps` steps with the `ddp` strategy and `optimizer` on its
// slice of one fixed global batch, and also trains a replica alone on the whole
// batch with `reference_optimizer`; then it compares the two sets of weights.
//
// With micro_batches > 1 each rank's slice is split further and the gradients of
// all but the last micro-batch accumulate under NoSync (no communication), so
// no_sync is checked too. With split_groups the optimizers start with the first
// half of the parameters and get the rest through add_param_group.
//
// With cuda_graph (CUDA only; ignored on a CPU, like task/train_step's) the first step
// runs eagerly and every later step of the data-parallel side is one replay of a CUDA
// graph holding zero_grad, the micro-batches' forward and backward with the
// strategy's collectives, and the optimizer step (which must be capturable: adamw
// impl fused); the reference trains eagerly.
//
// Records relative_error = ||W - W_ref|| / ||W_ref|| over all weights as one vector
// (and the largest per-parameter ratio) and fails the point above `tolerance`.
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "runner/cuda_graph.hpp"
#include "runner/ddp.hpp"
#include "runner/device.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/task.hpp"

namespace {

std::unique_ptr<runner::Optimizer> build_optimizer(runner::Context& ctx, const runner::Params& options,
                                                   torch::nn::Module& module, bool split_groups,
                                                   std::unique_ptr<runner::OptimizerFactory>& factory) {
  factory = ctx.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, options);
  std::vector<torch::Tensor> params = module.parameters();
  if (!split_groups) return factory->build({torch::optim::OptimizerParamGroup(params)});
  const auto half = static_cast<std::ptrdiff_t>(params.size() / 2);
  auto optimizer = factory->build({torch::optim::OptimizerParamGroup({params.begin(), params.begin() + half})});
  optimizer->add_param_group(torch::optim::OptimizerParamGroup({params.begin() + half, params.end()}));
  return optimizer;
}

class DdpCheck : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::int64_t global_batch = p.integer("batch_size");
    const std::int64_t steps = p.integer("steps");
    const std::int64_t micro = p.integer("micro_batches");
    const bool split_groups = p.flag("split_groups");
    const bool data_parallel = p.plugin("ddp").plugin_name() != "none";
    const int ranks = data_parallel ? ctx.dist.world_size : 1;
    if (steps < 1 || micro < 1) throw std::invalid_argument("ddp_check: steps and micro_batches must be >= 1");
    if (global_batch % (ranks * micro) != 0)
      throw std::invalid_argument("ddp_check: batch_size " + std::to_string(global_batch) +
                                  " must split evenly into " + std::to_string(ranks) + " ranks x " +
                                  std::to_string(micro) + " micro-batches");

    // Same seed on every rank: identical initial weights and global batch.
    auto reference = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    auto model = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    torch::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    const runner::Batch batch = model->random_batch(global_batch, gen);

    std::unique_ptr<runner::DataParallel> ddp;
    if (data_parallel) {
      ddp = ctx.create<runner::DataParallel>(runner::PluginKind::Ddp, p.plugin("ddp"));
      ddp->attach(model->module(), ctx);
    }
    std::unique_ptr<runner::OptimizerFactory> factory, reference_factory;
    auto optimizer = build_optimizer(ctx, p.plugin("optimizer"), model->module(), split_groups, factory);
    auto reference_optimizer =
        build_optimizer(ctx, p.plugin("reference_optimizer"), reference->module(), split_groups, reference_factory);

    const std::int64_t local = global_batch / ranks, micro_size = local / micro;
    const std::int64_t first = data_parallel ? ctx.dist.rank * local : 0;
    auto zero_grad = [&] {
      if (ddp) {
        ddp->zero_grad(model->module());
      } else {
        model->module().zero_grad(true);
      }
    };
    auto train_step = [&] {
      zero_grad();
      for (std::int64_t m = 0; m < micro; ++m) {
        const auto inputs = batch.inputs.narrow(0, first + m * micro_size, micro_size);
        const auto targets = batch.targets.narrow(0, first + m * micro_size, micro_size);
        // Mean over the micro-batch, scaled so the accumulated gradient is the slice's mean.
        const torch::Tensor loss = model->loss(model->forward(inputs), targets) / static_cast<double>(micro);
        if (ddp) ddp->set_gradient_sync(m == micro - 1);
        if (ddp) ddp->prepare_for_backward();
        loss.backward();
        if (ddp) ddp->finish_gradient_synchronization();
      }
      if (ddp) ddp->set_gradient_sync(true);
      optimizer->step();
    };
    std::unique_ptr<runner::CudaGraphStep> graph;
    if (p.flag("cuda_graph") && ctx.device.is_cuda()) {
      if (!factory->supports_graph_capture())
        throw std::invalid_argument("ddp_check: cuda_graph: true needs an optimizer whose step can be captured; "
                                    "use optimizer: {name: adamw, impl: fused}");
      graph = std::make_unique<runner::CudaGraphStep>(ctx.device, /*eager_steps=*/0, "ddp_check");
    }
    for (std::int64_t s = 0; s < steps; ++s) {
      reference->module().zero_grad(true);
      reference->loss(reference->forward(batch.inputs), batch.targets).backward();
      reference_optimizer->step();
      if (graph && s > 0) {
        graph->run(zero_grad, train_step);  // the first call captures, then replays: one step either way
      } else {
        train_step();
      }
    }
    ctx.synchronize();

    // The check: all weights as one vector, ||W - W_ref|| / ||W_ref||. The largest
    // per-parameter ratio is recorded too; it is larger for tensors whose norm is
    // tiny (a LayerNorm bias starts at zero), where rounding noise dominates.
    double worst = 0, diff_sq = 0, ref_sq = 0;
    std::string worst_name;
    const auto trained = model->module().named_parameters();
    const auto expected = reference->module().named_parameters();
    for (const auto& item : trained) {
      const torch::Tensor want = expected[item.key()];
      const double norm = want.norm().item<double>();
      const double diff = (item.value() - want).norm().item<double>();
      diff_sq += diff * diff;
      ref_sq += norm * norm;
      const double err = diff / (norm > 0 ? norm : 1.0);
      if (!(err <= worst)) {
        worst = err;
        worst_name = item.key();
      }
    }
    const double relative_error = std::sqrt(diff_sq) / std::sqrt(ref_sq > 0 ? ref_sq : 1.0);
    runner::Record r;
    r.add("relative_error", relative_error, "");
    r.add("max_parameter_relative_error", worst, "");
    r.add_text("worst_parameter", worst_name);
    r.add("ranks", static_cast<double>(ranks), "count");
    r.add("optimizer_state_bytes", static_cast<double>(optimizer->state_bytes()), "bytes");
    r.add("reference_optimizer_state_bytes", static_cast<double>(reference_optimizer->state_bytes()), "bytes");
    out.emit(std::move(r));
    const double tolerance = p.number("tolerance");
    if (!(relative_error <= tolerance)) {
      std::ostringstream msg;
      msg << "ddp_check: rank " << ctx.dist.rank << ": weights differ from single-process training by "
          << relative_error << " (relative; worst parameter " << worst_name << ": " << worst << "), above tolerance "
          << tolerance;
      throw std::runtime_error(msg.str());
    }
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "ddp_check";
  m.version = "1";
  m.description = "trains with a ddp strategy / optimizer and compares the weights with single-process training";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "toy", "the model trained both ways"),
      runner::opt_plugin("ddp", runner::PluginKind::Ddp, "none", "strategy under test, or none"),
      runner::opt_plugin("optimizer", runner::PluginKind::Optimizer, "sgd", "optimizer under test (e.g. sharded)"),
      runner::opt_plugin("reference_optimizer", runner::PluginKind::Optimizer, "sgd",
                         "what single-process training uses (the unsharded equivalent)"),
      runner::opt_int("batch_size", 16, "global batch, split evenly over ranks (and micro-batches)"),
      runner::opt_int("steps", 5, "optimizer steps"),
      runner::opt_int("micro_batches", 1, "micro-batches per step and rank; all but the last under NoSync"),
      runner::opt_bool("split_groups", false, "add the second half of the parameters with add_param_group"),
      runner::opt_float("tolerance", 1e-6, "largest relative error accepted"),
      runner::opt_bool("cuda_graph", false,
                       "steps after the first replay one CUDA graph of the data-parallel step (collectives "
                       "included); needs a capturable optimizer (adamw impl: fused); ignored on CPU"),
  };
  m.metrics = std::vector<std::string>{"relative_error", "max_parameter_relative_error", "worst_parameter", "ranks",
                                       "optimizer_state_bytes", "reference_optimizer_state_bytes"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<DdpCheck>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
