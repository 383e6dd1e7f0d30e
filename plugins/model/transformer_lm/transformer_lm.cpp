#include <map>
#include <memory>
#include <string>

#include "runner/context.hpp"
#include "transformer_lm.hpp"

namespace {

using runner::PluginKind;

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = PluginKind::Model;
  m.name = "transformer_lm";
  m.version = "2";
  m.description = "decoder-only transformer LM: RMSNorm, RoPE, causal MHA, SwiGLU, untied head";
  m.options = {
      runner::opt_enum("size", {"small", "medium", "large", "xl", "2.7B", "custom"}, "small",
                       "row of the spec's size table; custom takes d_model/d_ff/num_layers/num_heads"),
      runner::opt_int("d_model", 0, "residual width; 0 = from size, non-zero overrides it").in_range(0, 1 << 20),
      runner::opt_int("d_ff", 0, "SwiGLU hidden width; 0 = from size").in_range(0, 1 << 22),
      runner::opt_int("num_layers", 0, "number of blocks; 0 = from size").in_range(0, 4096),
      runner::opt_int("num_heads", 0, "attention heads (d_model must divide); 0 = from size").in_range(0, 4096),
      runner::opt_int("vocab_size", 10000, "vocabulary size").in_range(1, 1 << 24),
      runner::opt_int("context_length", 256, "sequence length of random batches (and RoPE table length)").in_range(1, 1 << 24),
      runner::opt_float("rope_theta", 10000.0, "RoPE base").at_least(1),
      runner::opt_plugin("attention", PluginKind::Attention, "naive", "attention implementation"),
      runner::opt_bool("fused_kernels", false,
                       "RMSNorm, RoPE (q and k together), SwiGLU activation and cross-entropy as fused CUDA "
                       "kernels (kernels/); on CPU their tensor-op references"),
  };
  // Analytic tasks (activation_memory) read these instead of including this plugin's headers.
  m.facts = [](const runner::Params& params) -> std::map<std::string, double> {
    const plugins::transformer_lm::TransformerDims d = plugins::transformer_lm::dims_from_params(params);
    return {{"vocab_size", static_cast<double>(d.vocab_size)},
            {"context_length", static_cast<double>(d.context_length)},
            {"d_model", static_cast<double>(d.d_model)},
            {"d_ff", static_cast<double>(d.d_ff)},
            {"num_layers", static_cast<double>(d.num_layers)},
            {"num_heads", static_cast<double>(d.num_heads)},
            {"parameters", static_cast<double>(plugins::transformer_lm::parameter_count(d))}};
  };
  m.create = [](const runner::Params& params, runner::Context& ctx) -> std::unique_ptr<runner::PluginBase> {
    const plugins::transformer_lm::TransformerDims dims = plugins::transformer_lm::dims_from_params(params);
    auto attention = ctx.create<runner::Attention>(PluginKind::Attention, params.plugin("attention"));
    return std::make_unique<plugins::transformer_lm::TransformerLM>(dims, std::move(attention), ctx.device,
                                                                    ctx.seed, params.flag("fused_kernels"));
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
