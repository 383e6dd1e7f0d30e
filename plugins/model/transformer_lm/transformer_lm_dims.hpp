// The transformer LM's resolved dimensions and its parameter count, header-only so
// that task plugins can build analytic tables (memory, FLOPs) without linking
// this plugin. Sizes are the spec's "Model under test" table.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "runner/model_sizes.hpp"
#include "runner/params.hpp"

namespace plugins::transformer_lm {

struct TransformerDims {
  std::int64_t vocab_size = 10000;
  std::int64_t context_length = 256;
  std::int64_t d_model = 0;
  std::int64_t d_ff = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  double rope_theta = 10000.0;

  std::int64_t d_head() const { return d_model / num_heads; }
};

// The named sizes are the API's (runner/model_sizes.hpp): report captions read them too.
using runner::kModelSizes;

// Throws std::invalid_argument naming the offending option.
inline void check_dims(const TransformerDims& d) {
  auto positive = [](std::int64_t v, const char* key) {
    if (v <= 0) throw std::invalid_argument(std::string("transformer_lm: ") + key + " must be > 0, got " + std::to_string(v));
  };
  positive(d.vocab_size, "vocab_size");
  positive(d.context_length, "context_length");
  positive(d.d_model, "d_model");
  positive(d.d_ff, "d_ff");
  positive(d.num_layers, "num_layers");
  positive(d.num_heads, "num_heads");
  if (d.d_model % d.num_heads != 0)
    throw std::invalid_argument("transformer_lm: d_model " + std::to_string(d.d_model) +
                                " is not divisible by num_heads " + std::to_string(d.num_heads));
  if (d.d_head() % 2 != 0)
    throw std::invalid_argument("transformer_lm: d_head " + std::to_string(d.d_head()) +
                                " must be even for rotary embeddings");
  if (!(d.rope_theta > 0)) throw std::invalid_argument("transformer_lm: rope_theta must be > 0");
}

// From the plugin's resolved options: `size` picks a row of kModelSizes; a non-zero
// d_model / d_ff / num_layers / num_heads overrides that row; size=custom needs all four.
inline TransformerDims dims_from_params(const runner::Params& params) {
  TransformerDims d;
  const std::string& size = params.text("size");
  if (size != "custom") {
    bool found = false;
    for (const runner::NamedModelSize& s : kModelSizes) {
      if (size == s.name) {
        d.d_model = s.d_model;
        d.d_ff = s.d_ff;
        d.num_layers = s.num_layers;
        d.num_heads = s.num_heads;
        found = true;
      }
    }
    if (!found) throw std::invalid_argument("transformer_lm: unknown size '" + size + "'");
  }
  auto take = [&](const char* key, std::int64_t& field) {
    const std::int64_t v = params.integer(key);
    if (v != 0) field = v;
    else if (size == "custom")
      throw std::invalid_argument(std::string("transformer_lm: size=custom needs ") + key + " > 0");
  };
  take("d_model", d.d_model);
  take("d_ff", d.d_ff);
  take("num_layers", d.num_layers);
  take("num_heads", d.num_heads);
  d.vocab_size = params.integer("vocab_size");
  d.context_length = params.integer("context_length");
  d.rope_theta = params.number("rope_theta");
  check_dims(d);
  return d;
}

struct ParameterCounts {
  std::int64_t token_embeddings = 0;  // vocab_size * d_model
  std::int64_t per_layer = 0;         // 4 d_model^2 (q,k,v,o) + 3 d_model d_ff (w1,w2,w3) + 2 d_model (norms)
  std::int64_t final_norm = 0;        // d_model
  std::int64_t lm_head = 0;           // vocab_size * d_model (untied)
  std::int64_t num_layers = 0;

  std::int64_t total() const { return token_embeddings + num_layers * per_layer + final_norm + lm_head; }
};

inline ParameterCounts parameter_counts(const TransformerDims& d) {
  ParameterCounts c;
  c.token_embeddings = d.vocab_size * d.d_model;
  c.per_layer = 4 * d.d_model * d.d_model + 3 * d.d_model * d.d_ff + 2 * d.d_model;
  c.final_norm = d.d_model;
  c.lm_head = d.vocab_size * d.d_model;
  c.num_layers = d.num_layers;
  return c;
}

inline std::int64_t parameter_count(const TransformerDims& d) { return parameter_counts(d).total(); }

}  // namespace plugins::transformer_lm
