// ddp/overlap: one asynchronous all-reduce per parameter, started during backward.
//
// Protocol: a parameter's gradient is ready when autograd has accumulated it
// into .grad (a post-accumulate-grad hook on the parameter, called on the
// autograd thread). The hook launches that gradient's all-reduce at once and
// keeps the Work; backward goes on computing earlier layers' gradients while
// NCCL reduces later ones on its own stream. finish_gradient_synchronization()
// waits for every launched Work (on CUDA: the compute stream waits for the
// communication stream, the CPU does not block) and reduces, in parameter
// order, any gradient whose hook never fired (unused parameters). The optimizer
// may step once it returns. The mean over ranks comes from NCCL's AVG, or with
// Gloo from dividing before a SUM. Hooks fire in autograd's order, which is the
// same on every rank for the same graph, so collectives match across ranks.
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <optional>

#include "runner/ddp.hpp"

namespace {

class OverlapDdp;

class GradReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  GradReadyHook(OverlapDdp* ddp, size_t index) : ddp_(ddp), index_(index) {}
  void operator()(const torch::autograd::Variable& param) override;

 private:
  OverlapDdp* ddp_;
  size_t index_;
};

class OverlapDdp : public runner::DataParallel {
 public:
  void attach(torch::nn::Module& module, runner::Context& ctx) override {
    runner::require_ranks(ctx, "ddp/overlap");
    dist_ = ctx.dist;
    for (const auto& p : module.parameters())
      if (p.requires_grad()) params_.push_back(p);
    launched_.assign(params_.size(), false);
    runner::broadcast_module_state(module, dist_);
    clock_.emplace(dist_, ctx.is_cuda());
    for (size_t i = 0; i < params_.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(params_[i], std::make_unique<GradReadyHook>(this, i));
  }

  ~OverlapDdp() override {
    for (auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  }

  void prepare_for_backward() override {
    works_.clear();
    std::fill(launched_.begin(), launched_.end(), false);
  }

  void grad_ready(size_t index) {
    if (!gradient_sync() || launched_[index]) return;
    launch(index);
  }

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (launched_[i]) continue;
      if (!params_[i].grad().defined()) params_[i].mutable_grad() = torch::zeros_like(params_[i]);
      launch(i);
    }
    for (auto& w : works_) w->wait();
    works_.clear();
    std::fill(launched_.begin(), launched_.end(), false);
  }

  runner::CommunicationStats take_communication() override { return clock_->take(); }
  void report(runner::Record& record) override {
    record.add("collectives_per_step", static_cast<double>(params_.size()), "count");
  }

 private:
  void launch(size_t index) {
    launched_[index] = true;
    works_.push_back(runner::allreduce_mean(params_[index].grad(), dist_, *clock_));
  }

  runner::Distributed dist_;
  std::vector<torch::Tensor> params_;
  std::vector<bool> launched_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::optional<runner::CollectiveClock> clock_;
};

void GradReadyHook::operator()(const torch::autograd::Variable&) { ddp_->grad_ready(index_); }

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "overlap";
  m.version = "1";
  m.description = "per-parameter async all-reduce launched from gradient hooks, overlapping backward";
  // What report() adds to the train step's record.
  m.metrics = std::vector<std::string>{"collectives_per_step"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<OverlapDdp>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
