// ddp/naive: data parallelism with one blocking all-reduce per parameter.
//
// Protocol: gradients are ready when loss.backward() returns (no hooks).
// finish_gradient_synchronization() then all-reduces each parameter's .grad on
// its own, in parameter order, and waits for each before the next; the result is
// the mean over ranks (NCCL: ReduceOp::AVG; Gloo: SUM, then divided by the world
// size). The optimizer may step once finish_gradient_synchronization() returns.
// Nothing overlaps backward: the baseline the other strategies improve on.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <optional>

#include "runner/ddp.hpp"

namespace {

class NaiveDdp : public runner::DataParallel {
 public:
  void attach(torch::nn::Module& module, runner::Context& ctx) override {
    runner::require_ranks(ctx, "ddp/naive");
    dist_ = ctx.dist;
    for (const auto& p : module.parameters())
      if (p.requires_grad()) params_.push_back(p);
    runner::broadcast_module_state(module, dist_);
    clock_.emplace(dist_, ctx.is_cuda());
  }

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    const bool avg = runner::backend_averages(dist_);
    for (auto& p : params_) {
      // A parameter unused this step still joins, so every rank runs the same collectives.
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      std::vector<at::Tensor> one = {p.grad()};
      c10d::AllreduceOptions opts;
      opts.reduceOp = avg ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
      auto work = dist_.group->allreduce(one, opts);
      clock_->launched(work, static_cast<std::int64_t>(p.grad().nbytes()));
      work->wait();
      if (!avg) p.grad().div_(dist_.world_size);
    }
  }

  runner::CommunicationStats take_communication() override { return clock_->take(); }
  void report(runner::Record& record) override {
    record.add("collectives_per_step", static_cast<double>(params_.size()), "count");
  }

 private:
  runner::Distributed dist_;
  std::vector<torch::Tensor> params_;
  std::optional<runner::CollectiveClock> clock_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "naive";
  m.version = "1";
  m.description = "one blocking all-reduce per parameter gradient after backward";
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<NaiveDdp>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
