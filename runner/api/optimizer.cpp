#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "runner/optimizer.hpp"

namespace runner {
namespace {

std::int64_t bytes_of(const torch::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; }

}  // namespace

Optimizer::~Optimizer() = default;

std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t bytes = 0;
  for (const auto& entry : optimizer.state()) {
    const torch::optim::OptimizerParamState* state = entry.second.get();
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(state)) {
      bytes += bytes_of(s->exp_avg()) + bytes_of(s->exp_avg_sq()) + bytes_of(s->max_exp_avg_sq());
    } else if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(state)) {
      bytes += bytes_of(a->exp_avg()) + bytes_of(a->exp_avg_sq()) + bytes_of(a->max_exp_avg_sq());
    } else if (const auto* m = dynamic_cast<const torch::optim::SGDParamState*>(state)) {
      bytes += bytes_of(m->momentum_buffer());
    }
  }
  return bytes;
}

std::int64_t TorchOptimizer::state_bytes() const { return optimizer_state_bytes(*inner_); }

}  // namespace runner
