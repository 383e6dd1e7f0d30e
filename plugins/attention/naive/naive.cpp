#include "naive_attention.hpp"

namespace {

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "naive";
  m.version = "1";
  m.description = "softmax(q k^T / sqrt(d) + mask) v in plain tensor ops (none, causal, sliding window)";
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<plugins::naive_attention::NaiveAttention>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
