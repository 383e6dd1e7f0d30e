#include <memory>

#include "runner/context.hpp"
#include "toy_model.hpp"

namespace {

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Model;
  m.name = "toy";
  m.version = "1";
  m.description = "Linear(in,10) -> ReLU -> LayerNorm(10) -> Linear(10,out), no biases; for dtype tables";
  m.options = {
      runner::opt_int("in_features", 64, "input width").in_range(1, 1 << 20),
      runner::opt_int("out_features", 10, "number of classes").in_range(1, 1 << 20),
  };
  m.create = [](const runner::Params& params, runner::Context& ctx) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<plugins::toy::ToyModel>(params.integer("in_features"), params.integer("out_features"),
                                                    ctx.device, ctx.seed);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
