// ddp/naive: data parallelism with one blocking all-reduce per parameter.
//
// Protocol: gradients are ready when loss.backward() returns (no hooks).
// finish_gradient_synchronization() then all-reduces each parameter's .grad on
// its own, in parameter order, and waits for each before the next; the result is
// the mean over ranks (NCCL: ReduceOp::AVG; Gloo: SUM, then divided by the world
// size). The optimizer may step once finish_gradient_synchronization() returns.
// Nothing overlaps backward: the baseline the other strategies improve on.
#include "runner/ddp.hpp"

namespace {

class NaiveDdp : public runner::BlockingDataParallel {
 public:
  NaiveDdp() : BlockingDataParallel("ddp/naive") {}

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    for (const auto& p : parameters_with_gradients()) allreduce_mean(p.grad());
  }

  void report(runner::Record& record) override {
    record.add("collectives_per_step", static_cast<double>(parameters_with_gradients().size()), "count");
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "naive";
  m.version = "1";
  m.description = "one blocking all-reduce per parameter gradient after backward";
  // What report() adds to the train step's record.
  m.metrics = std::vector<std::string>{"collectives_per_step"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<NaiveDdp>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
