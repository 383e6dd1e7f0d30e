// The dtypes autocast really gives each tensor of one forward + backward
// (benchmarking_mixed_precision (a)), read from the tensors themselves.
//
// Forward and loss run inside AutocastScope(ctx.precision); backward outside it,
// as PyTorch code does. One record per tensor, labelled tensor=<name>, in this order:
// parameters (by name), the intermediates the model exposes through
// runner::Model::forward_traced (toy: fc1_output, relu_output, layer_norm_output),
// logits (the traced output, whatever the model calls it), loss, then each
// parameter's gradient (<name>.grad).
#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/device.hpp"
#include "runner/model.hpp"
#include "runner/task.hpp"

namespace {

// PyTorch's Python names, so the table reads like `tensor.dtype` printed in Python.
std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    case at::kLong: return "int64";
    default: return c10::toString(type);
  }
}

class AutocastDtypes : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    auto model = ctx.create<runner::Model>(runner::PluginKind::Model, p.plugin("model"));
    at::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    const runner::Batch batch = model->random_batch(p.integer("batch_size"), gen);

    auto emit = [&](const std::string& name, const std::string& kind, const torch::Tensor& t) {
      runner::Record r;
      r.label("tensor", name);
      r.add_text("kind", kind);
      r.add_text("dtype", t.defined() ? dtype_name(t.scalar_type()) : "none");
      out.emit(std::move(r));
    };

    const auto params = model->module().named_parameters();
    for (const auto& item : params) emit(item.key(), "parameter", item.value());

    torch::Tensor logits, loss;
    {
      runner::AutocastScope autocast(ctx.device, ctx.precision);
      const std::vector<runner::NamedTensor> trace = model->forward_traced(batch.inputs);
      if (trace.empty()) throw std::runtime_error("autocast_dtypes: the model's forward_traced returned nothing");
      for (size_t i = 0; i + 1 < trace.size(); ++i) emit(trace[i].name, "activation", trace[i].tensor);
      logits = trace.back().tensor;
      loss = model->loss(logits, batch.targets);
    }
    emit("logits", "activation", logits);
    emit("loss", "loss", loss);
    loss.backward();
    for (const auto& item : params) emit(item.key() + ".grad", "gradient", item.value().grad());
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "autocast_dtypes";
  m.version = "1";
  m.description = "dtype of every parameter, activation, loss and gradient under the point's autocast";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "toy",
                         "model to inspect; toy exposes its intermediates (fc1, ReLU, LayerNorm outputs)"),
      runner::opt_int("batch_size", 8, "examples in the one random batch").in_range(1, 1e6),
  };
  m.metrics = std::vector<std::string>{"kind", "dtype"};
  m.labels = std::vector<std::string>{"tensor"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<AutocastDtypes>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
