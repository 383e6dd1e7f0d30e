// Compares an attention plugin with attention/naive on fresh random inputs: the output and
// dQ, dK, dV as relative errors ||x - ref|| / ||ref||. naive runs in fp64 on the same
// (rounded) inputs, so the error is the plugin's own: an fp32 reference adds rounding of
// the same order as the 1e-5 limit (seen on the GPU host's CPU: 1.7e-5 at seq 37).
// The seed is printed so a failure can be replayed.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <torch/torch.h>

#include "naive_attention.hpp"
#include "config/registry.hpp"
#include "runner/attention.hpp"
#include "runner/context.hpp"
#include "test_random.hpp"
#include "config/validate.hpp"

namespace attention_check {

struct Case {
  std::int64_t batch = 1, heads = 2, seq = 37, d = 16;
  bool causal = false;
  std::int64_t window = 0;  // with causal: a sliding window of this many keys
  runner::AttentionMask mask() const {
    if (window > 0) return runner::AttentionMask::sliding_window(window);
    return causal ? runner::AttentionMask::causal() : runner::AttentionMask::none();
  }
  std::string name() const {
    return "b" + std::to_string(batch) + " h" + std::to_string(heads) + " seq" + std::to_string(seq) + " d" +
           std::to_string(d) + (window > 0 ? " window " + std::to_string(window) : causal ? " causal" : "");
  }
};

struct Errors {
  double out = 0, dq = 0, dk = 0, dv = 0;
  double max() const { return std::max(std::max(out, dq), std::max(dk, dv)); }
};

// "out 1e-07 dq 2e-07 dk 2e-07 dv 1e-07": what a failed comparison prints.
inline std::ostream& operator<<(std::ostream& os, const Errors& e) {
  return os << "out " << e.out << " dq " << e.dq << " dk " << e.dk << " dv " << e.dv;
}

using test_support::fresh_seed;
using test_support::rel_err;

// Runs `attention` on q, k, v of `dtype` and naive on their fp64 copies.
inline Errors compare_with_naive(runner::Attention& attention, const Case& c, torch::Dtype dtype,
                                 torch::Device device, std::uint64_t seed) {
  at::globalContext().setAllowTF32CuBLAS(false);
  torch::manual_seed(seed);
  std::vector<std::int64_t> shape{c.batch};
  if (c.heads > 0) shape.push_back(c.heads);
  shape.push_back(c.seq);
  shape.push_back(c.d);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const torch::Tensor q32 = torch::randn(shape, opts), k32 = torch::randn(shape, opts),
                      v32 = torch::randn(shape, opts), dout32 = torch::randn(shape, opts);
  auto leaf = [&](const torch::Tensor& t) { return t.to(dtype).detach().requires_grad_(true); };
  torch::Tensor q = leaf(q32), k = leaf(k32), v = leaf(v32);
  torch::Tensor out = attention.forward(q, k, v, c.mask());
  out.backward(dout32.to(dtype));

  auto leaf64 = [&](const torch::Tensor& t) { return t.detach().to(torch::kDouble).requires_grad_(true); };
  torch::Tensor qr = leaf64(q), kr = leaf64(k), vr = leaf64(v);
  plugins::naive_attention::NaiveAttention naive;
  torch::Tensor ref = naive.forward(qr, kr, vr, c.mask());
  ref.backward(dout32.to(dtype).to(torch::kDouble));
  return {rel_err(out, ref), rel_err(q.grad(), qr.grad()), rel_err(k.grad(), kr.grad()),
          rel_err(v.grad(), vr.grad())};
}

// The plugin as the runner loads it: from the plugin directory, with its default options
// and `options_yaml` (a YAML map, e.g. "{package_dir: dir}") over them.
inline std::unique_ptr<runner::Attention> load(runner::PluginRegistry& registry, const std::string& name,
                                               const std::string& options_yaml = "") {
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Attention, name, options_yaml);
  runner::Context ctx;
  ctx.plugins = &registry;
  return ctx.create<runner::Attention>(runner::PluginKind::Attention, params);
}

}  // namespace attention_check
