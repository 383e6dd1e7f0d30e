// optimizer/sharded: optimizer-state sharding around any optimizer plugin.
//
// Each parameter has one owner rank, chosen when its group is added: the rank
// whose shard holds the fewest bytes so far, taking the group's parameters
// largest first (greedy balancing by size). A rank builds its inner optimizer
// (with the `inner` plugin's make()) over the parameters it owns only, so
// optimizer state (e.g. AdamW's two moments) exists once across ranks, not once
// per rank.
//
// Protocol: step() steps the inner optimizer (own shard: gradients must already
// be averaged over ranks, e.g. by a ddp plugin), then broadcasts every parameter
// from its owner; when step() returns all ranks hold the same weights.
// zero_grad() clears every parameter's gradient, owned or not. add_param_group()
// splits the new group the same way and adds each rank's part to its inner
// optimizer (with the group's options), creating it on first use.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "runner/context.hpp"
#include "runner/optimizer.hpp"

namespace {

class ShardedOptimizer : public runner::Optimizer {
 public:
  ShardedOptimizer(std::unique_ptr<runner::OptimizerFactory> inner, runner::Distributed dist)
      : factory_(std::move(inner)), dist_(std::move(dist)), shard_bytes_(std::max(1, dist_.world_size), 0) {}

  void add_param_group(const torch::optim::OptimizerParamGroup& group) override {
    const auto& params = group.params();
    std::vector<size_t> order(params.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params[a].nbytes() > params[b].nbytes(); });
    std::vector<int> owner(params.size(), 0);
    for (size_t i : order) {
      const int r = static_cast<int>(std::min_element(shard_bytes_.begin(), shard_bytes_.end()) - shard_bytes_.begin());
      owner[i] = r;
      shard_bytes_[r] += static_cast<std::int64_t>(params[i].nbytes());
    }
    std::vector<torch::Tensor> mine;
    for (size_t i = 0; i < params.size(); ++i) {
      all_params_.push_back(params[i]);
      owners_.push_back(owner[i]);
      if (owner[i] == dist_.rank) mine.push_back(params[i]);
    }
    if (mine.empty()) return;
    torch::optim::OptimizerParamGroup part(mine, group.has_options() ? group.options().clone() : nullptr);
    if (!inner_) {
      std::vector<torch::optim::OptimizerParamGroup> groups;
      groups.push_back(std::move(part));
      inner_ = factory_->make(std::move(groups));
    } else {
      inner_->add_param_group(part);
    }
  }

  void step() override {
    if (inner_) inner_->step();
    if (!dist_.group) return;
    torch::NoGradGuard no_grad;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t i = 0; i < all_params_.size(); ++i) {
      std::vector<at::Tensor> one = {all_params_[i].detach()};
      c10d::BroadcastOptions opts;
      opts.rootRank = owners_[i];
      works.push_back(dist_.group->broadcast(one, opts));
    }
    for (auto& w : works) w->wait();
  }

  void zero_grad(bool set_to_none) override {
    for (auto& p : all_params_) {
      if (!p.grad().defined()) continue;
      if (set_to_none) p.mutable_grad().reset();
      else p.mutable_grad().zero_();
    }
  }

  std::int64_t state_bytes() const override { return inner_ ? runner::optimizer_state_bytes(*inner_) : 0; }

 private:
  std::unique_ptr<runner::OptimizerFactory> factory_;
  runner::Distributed dist_;
  std::unique_ptr<torch::optim::Optimizer> inner_;
  std::vector<torch::Tensor> all_params_;
  std::vector<int> owners_;
  std::vector<std::int64_t> shard_bytes_;
};

class ShardedFactory : public runner::OptimizerFactory {
 public:
  ShardedFactory(const runner::Params& p, runner::Context& ctx) : params_(p), ctx_(ctx) {}

  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::optim::OptimizerParamGroup>) override {
    throw std::logic_error("optimizer/sharded: use build(), which returns the sharding runner::Optimizer");
  }

  std::unique_ptr<runner::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    auto inner = ctx_.create<runner::OptimizerFactory>(runner::PluginKind::Optimizer, params_.plugin("inner"));
    auto sharded = std::make_unique<ShardedOptimizer>(std::move(inner), ctx_.dist);
    for (const auto& g : groups) sharded->add_param_group(g);
    return sharded;
  }

 private:
  runner::Params params_;
  runner::Context& ctx_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Optimizer;
  m.name = "sharded";
  m.version = "1";
  m.description = "optimizer-state sharding: each rank steps its shard of the parameters, then broadcasts them";
  m.options = {runner::opt_plugin("inner", runner::PluginKind::Optimizer, "adamw", "the optimizer each rank runs on its shard")};
  m.create = [](const runner::Params& p, runner::Context& ctx) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<ShardedFactory>(p, ctx);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
