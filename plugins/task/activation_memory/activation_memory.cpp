// Analytic memory of a model, from the same `model` options a train_step point
// uses: the model plugin's declared facts (runner::Context::facts: context_length,
// d_model, parameters), so nothing is allocated and no model header is included:
//   residual-stream activation  = batch_size x context_length x d_model x dtype_bytes
//   parameters / gradients      = P x 4 B each (fp32)
//   AdamW state (m and v)       = P x 8 B
// so weights + gradients + optimizer state is 16 B per parameter.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "runner/task.hpp"

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::int64_t kFp32Bytes = 4;
constexpr std::int64_t kAdamWStateBytesPerParam = 2 * kFp32Bytes;  // exp_avg, exp_avg_sq

// 10485760 -> "10,485,760"
std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return (n < 0 ? "-" : "") + digits;
}

std::string mib_text(double mib) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, mib >= 1.0 ? "%.1f" : "%.4f", mib);
  return buffer;
}

class ActivationMemory : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const runner::Params& model = p.plugin("model");
    std::map<std::string, double> facts;
    try {
      facts = ctx.facts(runner::PluginKind::Model, model);
    } catch (const std::runtime_error& e) {
      throw runner::SkipPoint("activation_memory: " + std::string(e.what()));
    }
    auto fact = [&](const char* key) -> std::int64_t {
      const auto it = facts.find(key);
      if (it == facts.end())
        throw runner::SkipPoint("activation_memory: model '" + model.plugin_name() + "' declares no " + key);
      return static_cast<std::int64_t>(it->second);
    };
    const std::int64_t context_length = fact("context_length"), d_model = fact("d_model");
    const std::int64_t batch = p.integer("batch_size");
    const std::int64_t dtype_bytes = p.integer("dtype_bytes");
    if (batch < 1 || dtype_bytes < 1) throw std::invalid_argument("activation_memory: batch_size and dtype_bytes must be >= 1");

    const std::int64_t activation_bytes = batch * context_length * d_model * dtype_bytes;
    const double activation_mib = static_cast<double>(activation_bytes) / kBytesPerMiB;
    const std::string derivation = std::to_string(batch) + " × " + std::to_string(context_length) + " × " +
                                   std::to_string(d_model) + " × " + std::to_string(dtype_bytes) + " B = " +
                                   with_thousands(activation_bytes) + " B = " + mib_text(activation_mib) + " MiB";

    const std::int64_t params = fact("parameters");
    const std::int64_t parameter_bytes = params * kFp32Bytes;
    const std::int64_t optimizer_state_bytes = params * kAdamWStateBytesPerParam;
    const std::int64_t training_state_bytes = 2 * parameter_bytes + optimizer_state_bytes;

    runner::Record r;
    r.add("activation_bytes", static_cast<double>(activation_bytes), "bytes");
    r.add("activation_mib", activation_mib, "MiB");
    r.add_text("derivation", derivation);
    r.add("parameter_count", static_cast<double>(params), "");
    r.add("parameter_bytes", static_cast<double>(parameter_bytes), "bytes");
    r.add("gradient_bytes", static_cast<double>(parameter_bytes), "bytes");
    r.add("optimizer_state_bytes", static_cast<double>(optimizer_state_bytes), "bytes");
    r.add("training_state_bytes", static_cast<double>(training_state_bytes), "bytes");
    r.add("training_state_gib", static_cast<double>(training_state_bytes) / kBytesPerGiB, "GiB");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "activation_memory";
  m.version = "1";
  m.description = "analytic size of one residual-stream activation and of fp32 weights/grads/AdamW state";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "transformer_lm",
                         "transformer_lm options (size, context_length, ...); only its dimensions are read"),
      runner::opt_int("batch_size", 4, "sequences per batch").in_range(1, 1e6),
      runner::opt_int("dtype_bytes", 4, "bytes per activation element (4 = fp32, 2 = bf16)").in_range(1, 8),
  };
  m.metrics = std::vector<std::string>{"activation_bytes", "activation_mib", "derivation", "parameter_count", "parameter_bytes",
               "gradient_bytes", "optimizer_state_bytes", "training_state_bytes", "training_state_gib"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<ActivationMemory>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
