#include "fused_optimizer.hpp"

#include <memory>
#include <stdexcept>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "adamw_optimizer.hpp"
#include "adamw/fused_adamw.hpp"
#include "runner/weight_copies.hpp"

namespace plugins::adamw {

using torch::optim::AdamWOptions;

FusedAdamW::FusedAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, const AdamWOptions& defaults)
    : Optimizer(groups, std::make_unique<AdamWOptions>(defaults)) {
  check_groups(param_groups_);
  for (const auto& group : param_groups_) {
    for (const auto& p : group.params())
      if (p.scalar_type() != at::kFloat)
        throw std::invalid_argument("adamw (impl: fused): parameters must be float32, got " +
                                    std::string(c10::toString(p.scalar_type())) + "; use impl: foreach");
  }
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = evaluate_closure(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps, copies;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "adamw: sparse gradients are not supported");
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<FusedAdamWParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Contiguous));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Contiguous));
        fresh->device_step = at::zeros({}, p.options().dtype(at::kFloat));
        slot = std::move(fresh);
      }
      auto& state = static_cast<FusedAdamWParamState&>(*slot);
      state.step(state.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
      steps.push_back(state.device_step);
      copies.push_back(runner::weight_copy(p));  // the model's bf16/fp16 working copy, if it keeps one
    }
    if (params.empty()) continue;
    at::_foreach_add_(steps, 1.0);
    const auto [beta1, beta2] = o.betas();
    kernels::adamw::fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, steps,
                                 {o.lr(), beta1, beta2, o.eps(), o.weight_decay()}, copies);
  }
  return loss;
}

}  // namespace plugins::adamw
