// ddp/flat: data parallelism with one all-reduce of all gradients, flattened.
//
// Protocol: gradients are ready when loss.backward() returns (no hooks).
// finish_gradient_synchronization() copies every .grad into one flat buffer,
// all-reduces it once (mean over ranks: NCCL AVG, or Gloo SUM then divide) and
// copies the slices back into the .grad tensors. The optimizer may step once it
// returns. One collective instead of one per parameter: fewer launches and
// latencies, at the price of two gradient-sized copies and a buffer.
#include <torch/torch.h>

#include "runner/ddp.hpp"

namespace {

class FlatDdp : public runner::BlockingDataParallel {
 public:
  FlatDdp() : BlockingDataParallel("ddp/flat") {}

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    const auto& params = parameters_with_gradients();
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad().reshape(-1));
    const torch::Tensor flat = torch::cat(grads);
    allreduce_mean(flat);
    std::int64_t offset = 0;
    for (const auto& p : params) {
      const std::int64_t n = p.numel();
      p.grad().copy_(flat.narrow(0, offset, n).view_as(p.grad()));
      offset += n;
    }
  }

  void report(runner::Record& record) override { record.add("collectives_per_step", 1.0, "count"); }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "flat";
  m.version = "1";
  m.description = "one all-reduce of all gradients flattened into one buffer, after backward";
  // What report() adds to the train step's record.
  m.metrics = std::vector<std::string>{"collectives_per_step"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<FlatDdp>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
