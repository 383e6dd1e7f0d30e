#include <memory>

#include "adamw_optimizer.hpp"
#include "fused_optimizer.hpp"
#include "runner/optimizer.hpp"

namespace {

class AdamWFactory : public runner::OptimizerFactory {
 public:
  explicit AdamWFactory(const runner::Params& p)
      : options_(torch::optim::AdamWOptions(p.number("lr"))
                     .betas({p.number("beta1"), p.number("beta2")})
                     .eps(p.number("eps"))
                     .weight_decay(p.number("weight_decay"))),
        fused_(p.text("impl") == "fused") {
    plugins::adamw::check_options(options_);
  }

  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    if (fused_) return std::make_unique<plugins::adamw::FusedAdamW>(groups, options_);
    return std::make_unique<plugins::adamw::AdamW>(groups, options_);
  }

  // The fused step keeps its step counts on the device; the foreach step passes
  // bias corrections as host scalars, which a graph would freeze at capture.
  bool supports_graph_capture() const override { return fused_; }

 private:
  torch::optim::AdamWOptions options_;
  bool fused_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Optimizer;
  m.name = "adamw";
  m.version = "2";
  m.description = "AdamW (decoupled weight decay), multi-tensor or fused one-pass kernel, numerics of torch.optim.AdamW";
  m.options = {
      runner::opt_float("lr", 1e-3, "learning rate"),
      runner::opt_float("beta1", 0.9, "first-moment decay"),
      runner::opt_float("beta2", 0.999, "second-moment decay"),
      runner::opt_float("eps", 1e-8, "added to the bias-corrected sqrt(v)"),
      runner::opt_float("weight_decay", 0.01, "decoupled: p *= 1 - lr * weight_decay each step"),
      runner::opt_enum("impl", {"foreach", "fused"}, "foreach",
                       "foreach: multi-tensor ATen ops (~8 passes over memory); fused: one-pass kernel "
                       "(kernels/adamw), CUDA-graph capturable, fp32 parameters"),
  };
  m.create = [](const runner::Params& params, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<AdamWFactory>(params);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
