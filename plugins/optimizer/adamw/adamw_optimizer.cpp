#include "adamw_optimizer.hpp"

#include <cmath>
#include <memory>
#include <stdexcept>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/zeros_like.h>

#include "optimizer_state.hpp"

namespace plugins::adamw {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

void check_options(const AdamWOptions& o) {
  const auto [beta1, beta2] = o.betas();
  if (!(o.lr() >= 0)) throw std::invalid_argument("adamw: lr must be >= 0, got " + std::to_string(o.lr()));
  if (!(o.eps() >= 0)) throw std::invalid_argument("adamw: eps must be >= 0, got " + std::to_string(o.eps()));
  if (!(beta1 >= 0 && beta1 < 1)) throw std::invalid_argument("adamw: beta1 must be in [0, 1), got " + std::to_string(beta1));
  if (!(beta2 >= 0 && beta2 < 1)) throw std::invalid_argument("adamw: beta2 must be in [0, 1), got " + std::to_string(beta2));
  if (!(o.weight_decay() >= 0))
    throw std::invalid_argument("adamw: weight_decay must be >= 0, got " + std::to_string(o.weight_decay()));
  if (o.amsgrad()) throw std::invalid_argument("adamw: amsgrad is not supported");
}

void check_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  for (const auto& group : groups) {
    const auto* options = dynamic_cast<const AdamWOptions*>(&group.options());
    if (options == nullptr) throw std::invalid_argument("adamw: a parameter group carries non-AdamW options");
    check_options(*options);
  }
}

torch::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

namespace {

// The tensors of one group that take part in this step, in parallel lists.
struct GroupStep {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<c10::Scalar> neg_step_sizes;        // -lr / (1 - beta1^t)
  std::vector<c10::Scalar> bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

}  // namespace

AdamW::AdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, const AdamWOptions& defaults)
    : Optimizer(groups, std::make_unique<AdamWOptions>(defaults)) {
  check_groups(param_groups_);
}

torch::Tensor AdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = evaluate_closure(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    GroupStep s;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "adamw: sparse gradients are not supported");
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      const double t = static_cast<double>(state.step());
      s.params.push_back(p);
      s.grads.push_back(p.grad());
      s.exp_avgs.push_back(state.exp_avg());
      s.exp_avg_sqs.push_back(state.exp_avg_sq());
      s.neg_step_sizes.emplace_back(-o.lr() / (1.0 - std::pow(beta1, t)));
      s.bias_correction2_sqrt.emplace_back(std::sqrt(1.0 - std::pow(beta2, t)));
    }
    if (s.params.empty()) continue;

    if (o.weight_decay() != 0) at::_foreach_mul_(s.params, 1.0 - o.lr() * o.weight_decay());
    at::_foreach_lerp_(s.exp_avgs, s.grads, 1.0 - beta1);
    at::_foreach_mul_(s.exp_avg_sqs, beta2);
    at::_foreach_addcmul_(s.exp_avg_sqs, s.grads, s.grads, 1.0 - beta2);
    std::vector<torch::Tensor> denom = at::_foreach_sqrt(s.exp_avg_sqs);
    at::_foreach_div_(denom, s.bias_correction2_sqrt);
    at::_foreach_add_(denom, o.eps());
    at::_foreach_addcdiv_(s.params, s.exp_avgs, denom, s.neg_step_sizes);
  }
  return loss;
}

std::int64_t AdamW::state_bytes() const { return optimizer_state_bytes(*this); }

}  // namespace plugins::adamw
