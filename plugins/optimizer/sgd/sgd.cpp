// Plain SGD through torch::optim::SGD: p -= lr * (g + weight_decay p), with an
// optional momentum buffer.
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/optim/sgd.h>

#include "runner/optimizer.hpp"

namespace {

class SgdFactory : public runner::OptimizerFactory {
 public:
  explicit SgdFactory(const runner::Params& p)
      : options_(torch::optim::SGDOptions(p.number("lr")).momentum(p.number("momentum")).weight_decay(
            p.number("weight_decay"))) {
    if (!(options_.lr() >= 0)) throw std::invalid_argument("sgd: lr must be >= 0, got " + std::to_string(options_.lr()));
    if (!(options_.momentum() >= 0))
      throw std::invalid_argument("sgd: momentum must be >= 0, got " + std::to_string(options_.momentum()));
    if (!(options_.weight_decay() >= 0))
      throw std::invalid_argument("sgd: weight_decay must be >= 0, got " + std::to_string(options_.weight_decay()));
  }

  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<torch::optim::SGD>(groups, options_);
  }

 private:
  torch::optim::SGDOptions options_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Optimizer;
  m.name = "sgd";
  m.version = "1";
  m.description = "stochastic gradient descent (torch::optim::SGD)";
  m.options = {
      runner::opt_float("lr", 1e-3, "learning rate").at_least(0),
      runner::opt_float("momentum", 0.0, "momentum factor; 0 keeps no state").in_range(0, 1),
      runner::opt_float("weight_decay", 0.0, "L2 penalty added to the gradient").at_least(0),
  };
  m.create = [](const runner::Params& params, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<SgdFactory>(params);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
