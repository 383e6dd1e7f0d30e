// Bytes held by an optimizer's per-parameter state (moment buffers), for any
// optimizer whose state uses LibTorch's param-state types: this plugin's AdamW,
// torch::optim::AdamW / Adam, torch::optim::SGD (momentum buffers). Header-only
// so tasks can use it without linking an optimizer plugin.
#pragma once
#include <cstdint>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace plugins::adamw {

inline std::int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0;
}

inline std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    (void)key;
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(state.get())) {
      bytes += tensor_bytes(s->exp_avg()) + tensor_bytes(s->exp_avg_sq()) + tensor_bytes(s->max_exp_avg_sq());
    } else if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      bytes += tensor_bytes(a->exp_avg()) + tensor_bytes(a->exp_avg_sq()) + tensor_bytes(a->max_exp_avg_sq());
    } else if (const auto* m = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      bytes += tensor_bytes(m->momentum_buffer());
    }
  }
  return bytes;
}

}  // namespace plugins::adamw
