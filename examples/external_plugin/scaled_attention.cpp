// An attention plugin: softmax(q k^T / (sqrt(d) * temperature) + mask) v in
// tensor ops, differentiable through autograd. Any task that takes an attention
// (task/attention_bench's `attention`, model/transformer_lm's `attention`) can name it:
//   attention: {name: scaled, temperature: 1.0}
// temperature 1 is the textbook attention, so attention_bench's check_against_naive
// reads a relative error near 0 (attention.yaml); other temperatures show the check
// working.
#include <cmath>
#include <limits>
#include <memory>

#include <ATen/ops/masked_fill.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>

#include "runner/attention.hpp"
#include "runner/range.hpp"

namespace {

class ScaledAttention : public runner::Attention {
 public:
  explicit ScaledAttention(double temperature) : temperature_(temperature) {}

  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override {
    // Shapes are checked by TORCH_CHECK: the host records the message as the point's error.
    TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim() && q.size(-1) == k.size(-1) &&
                    k.size(-2) == v.size(-2),
                "scaled attention: q, k, v shapes do not fit: ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
    // Named ranges show up in profiler traces (nsys, the kernels profiler) under these names.
    runner::ScopedRange range("scaled_attention");
    torch::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / (std::sqrt(double(q.size(-1))) * temperature_);
    if (mask.hides_future()) {  // causal: key j > query i hidden; a sliding window also j <= i - window
      const auto ones = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool));
      at::Tensor hidden = at::triu(ones, /*diagonal=*/1);
      if (mask.kind == runner::AttentionMask::Kind::sliding_window)
        hidden = at::logical_or(hidden, at::tril(ones, /*diagonal=*/-mask.window));
      scores = at::masked_fill(scores, hidden, -std::numeric_limits<double>::infinity());
    }
    return at::matmul(at::softmax(scores, -1), v);
  }

  // Said in attention_bench's `mechanism` metric beside the plugin's name.
  std::string mechanism() const override { return "scaled (temperature " + std::to_string(temperature_) + ")"; }

 private:
  double temperature_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "scaled";
  m.version = "1";
  m.description = "example out-of-tree attention: softmax(q k^T / (sqrt(d) temperature)) v";
  // Options are checked by the host before anything runs (type, range), with the
  // experiment file's line in the message.
  m.options = {runner::opt_float("temperature", 1.0, "divides the scores; 1 is the textbook attention")
                   .in_range(1e-3, 1e3)};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<ScaledAttention>(p.number("temperature"));
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
