// ddp/flat: data parallelism with one all-reduce of all gradients, flattened.
//
// Protocol: gradients are ready when loss.backward() returns (no hooks).
// finish_gradient_synchronization() copies every .grad into one flat buffer,
// all-reduces it once (mean over ranks: NCCL AVG, or Gloo SUM then divide) and
// copies the slices back into the .grad tensors. The optimizer may step once it
// returns. One collective instead of one per parameter: fewer launches and
// latencies, at the price of two gradient-sized copies and a buffer.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <optional>

#include "runner/ddp.hpp"

namespace {

class FlatDdp : public runner::DataParallel {
 public:
  void attach(torch::nn::Module& module, runner::Context& ctx) override {
    runner::require_ranks(ctx, "ddp/flat");
    dist_ = ctx.dist;
    for (const auto& p : module.parameters())
      if (p.requires_grad()) params_.push_back(p);
    runner::broadcast_module_state(module, dist_);
    clock_.emplace(dist_, ctx.is_cuda());
  }

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    std::vector<torch::Tensor> grads;
    for (auto& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad().reshape(-1));
    }
    std::vector<at::Tensor> flat = {torch::cat(grads)};
    const bool avg = runner::backend_averages(dist_);
    c10d::AllreduceOptions opts;
    opts.reduceOp = avg ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
    auto work = dist_.group->allreduce(flat, opts);
    clock_->launched(work, static_cast<std::int64_t>(flat[0].nbytes()));
    work->wait();
    if (!avg) flat[0].div_(dist_.world_size);
    std::int64_t offset = 0;
    for (auto& p : params_) {
      const std::int64_t n = p.numel();
      p.grad().copy_(flat[0].narrow(0, offset, n).view_as(p.grad()));
      offset += n;
    }
  }

  runner::CommunicationStats take_communication() override { return clock_->take(); }
  void report(runner::Record& record) override { record.add("collectives_per_step", 1.0, "count"); }

 private:
  runner::Distributed dist_;
  std::vector<torch::Tensor> params_;
  std::optional<runner::CollectiveClock> clock_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "flat";
  m.version = "1";
  m.description = "one all-reduce of all gradients flattened into one buffer, after backward";
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<FlatDdp>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
