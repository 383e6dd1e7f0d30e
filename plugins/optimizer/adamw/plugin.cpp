#include <memory>

#include "adamw.hpp"
#include "runner/optimizer.hpp"

namespace {

class AdamWFactory : public runner::OptimizerFactory {
 public:
  explicit AdamWFactory(const runner::Params& p)
      : options_(torch::optim::AdamWOptions(p.number("lr"))
                     .betas({p.number("beta1"), p.number("beta2")})
                     .eps(p.number("eps"))
                     .weight_decay(p.number("weight_decay"))) {
    plugins::adamw::check_options(options_);
  }

  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<plugins::adamw::AdamW>(groups, options_);
  }

 private:
  torch::optim::AdamWOptions options_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Optimizer;
  m.name = "adamw";
  m.version = "1";
  m.description = "AdamW (decoupled weight decay) with multi-tensor updates, numerics of torch.optim.AdamW";
  m.options = {
      runner::opt_float("lr", 1e-3, "learning rate"),
      runner::opt_float("beta1", 0.9, "first-moment decay"),
      runner::opt_float("beta2", 0.999, "second-moment decay"),
      runner::opt_float("eps", 1e-8, "added to the bias-corrected sqrt(v)"),
      runner::opt_float("weight_decay", 0.01, "decoupled: p *= 1 - lr * weight_decay each step"),
  };
  m.create = [](const runner::Params& params, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<AdamWFactory>(params);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
