// The spec's communication_accounting answers, evaluated from the experiment's
// options (formulas and their derivation in xxl_formulas.hpp). Nothing is
// allocated; each point emits one record whose `derivation` text shows the
// numbers put into the formula.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "runner/task.hpp"
#include "xxl_formulas.hpp"

namespace plugins::communication_accounting {
namespace {

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

FfnStack stack_from(const runner::Params& p) {
  FfnStack s;
  s.d_model = p.integer("d_model");
  s.d_ff = p.integer("d_ff");
  s.blocks = p.integer("blocks");
  s.weight_bytes = p.number("weight_bytes");
  s.gradient_bytes = p.number("gradient_bytes");
  s.optimizer_bytes = p.number("optimizer_bytes");
  s.activation_bytes = p.number("activation_bytes");
  return s;
}

Mesh mesh_from(const runner::Params& p) {
  Mesh m;
  m.chip_flops = p.number("chip_flops");
  m.ici_bandwidth = p.number("ici_bandwidth");
  m.x = p.integer("mesh_x");
  m.y = p.integer("mesh_y");
  m.axes_x = p.number("axes_x");
  m.axes_y = p.number("axes_y");
  m.weight_comm_bytes = p.number("weight_comm_bytes");
  m.activation_comm_bytes = p.number("activation_comm_bytes");
  return m;
}

// (a) and (b): model state and saved activations, whole and sharded over `devices`.
runner::Record memory_record(const runner::Params& p) {
  const FfnStack s = stack_from(p);
  const double tokens = static_cast<double>(p.integer("tokens"));
  const double sharded = p.number("activation_sharded_fraction");
  const std::int64_t n = p.integer("devices");
  const double limit = p.number("device_memory_gb") * kBytesPerGB;
  const double activations = s.activations_per_token() * tokens;
  const double whole = s.model_state() + activations;
  const double per_device = fsdp_bytes_per_device(s, tokens, sharded, n);
  const std::int64_t smallest = smallest_fsdp_devices(s, tokens, sharded, limit);

  runner::Record r;
  r.add("parameters", s.parameters(), "count");
  r.add("weights_gb", s.weights() / kBytesPerGB, "GB");
  r.add("gradients_gb", s.gradients() / kBytesPerGB, "GB");
  r.add("optimizer_state_gb", s.optimizer_state() / kBytesPerGB, "GB");
  r.add("model_state_gb", s.model_state() / kBytesPerGB, "GB");
  r.add("activations_per_token_mb", s.activations_per_token() / 1e6, "MB");
  r.add("activations_gb", activations / kBytesPerGB, "GB");
  r.add("single_device_gb", whole / kBytesPerGB, "GB");
  r.add("devices_to_hold", std::ceil(whole / limit), "count");
  r.add("per_device_gb", per_device / kBytesPerGB, "GB");
  r.add_text("fits", per_device < limit ? "yes" : "no");
  const double shardable = s.model_state() + sharded * activations, room = limit - (1.0 - sharded) * activations;
  if (smallest > 0) {
    r.add("smallest_devices", static_cast<double>(smallest), "count");
    r.add_text("smallest_derivation", "N > (" + fixed(s.model_state() / kBytesPerGB, 1) + " + " + fixed(sharded, 2) +
                                          " x " + fixed(activations / kBytesPerGB, 1) + ") / (" +
                                          fixed(limit / kBytesPerGB, 0) + " - " + fixed(1.0 - sharded, 2) + " x " +
                                          fixed(activations / kBytesPerGB, 1) + ") = " + fixed(shardable / room, 3) +
                                          ", so N = " + std::to_string(smallest));
  } else {
    r.add_text("smallest_devices", "none (unsharded activations alone exceed the device)");
    r.add_text("smallest_derivation", "(1 - f) x activations >= device memory");
  }
  r.add_text("derivation",
             "P = 2 x " + std::to_string(s.blocks) + " x " + std::to_string(s.d_model) + " x " + std::to_string(s.d_ff) +
                 " = " + fixed(s.parameters() / 1e9, 2) + "e9; state = P x (" + fixed(s.weight_bytes, 0) + " + " +
                 fixed(s.gradient_bytes, 0) + " + " + fixed(s.optimizer_bytes, 0) + ") B = " +
                 fixed(s.model_state() / kBytesPerGB, 1) + " GB; activations = " + fixed(tokens, 0) + " x " +
                 std::to_string(s.blocks) + " x (" + std::to_string(s.d_model) + " + " + std::to_string(s.d_ff) +
                 ") x " + fixed(s.activation_bytes, 0) + " B = " + fixed(activations / kBytesPerGB, 1) +
                 " GB; per device = (state + " + fixed(sharded, 2) + " act) / " + std::to_string(n) + " + " +
                 fixed(1.0 - sharded, 2) + " act = " + fixed(per_device / kBytesPerGB, 1) + " GB");
  return r;
}

// (c) and (d): the per-chip batch at which the forward pass is compute-bound.
runner::Record mesh_record(const runner::Params& p) {
  const Mesh m = mesh_from(p);
  const std::int64_t d_model = p.integer("d_model"), d_ff = p.integer("d_ff");
  const double threshold = m.fsdp_tokens_per_chip();
  const bool tp_ok = m.tp_compute_bound(d_ff);

  runner::Record r;
  r.add_text("trick", p.text("trick"));
  r.add("chips", static_cast<double>(m.chips()), "count");
  r.add("alpha", m.alpha(), "FLOP/byte");
  r.add("fsdp_tokens_per_chip", threshold, "tokens");
  r.add("max_tp_degree", m.max_tp_degree(d_ff), "");
  r.add_text("tp_compute_bound", tp_ok ? "yes" : "no");
  r.add("best_tokens_per_chip", m.best_tokens_per_chip(d_ff), "tokens");
  std::string derivation = "alpha = " + fixed(m.chip_flops, 0) + " / " + fixed(m.ici_bandwidth, 0) + " = " +
                           fixed(m.alpha(), 1) + "; B/N >= (" + fixed(m.weight_comm_bytes, 0) + "/2) x " +
                           fixed(m.alpha(), 1) + " / (" + std::to_string(m.y) + " x " + fixed(m.axes_x, 0) +
                           ") = " + fixed(threshold, 1) + "; TP needs Y <= " + fixed(m.max_tp_degree(d_ff), 1);
  if (tp_ok) {
    const double per_chip = std::ceil(threshold);
    const double global = per_chip * static_cast<double>(m.chips());
    r.add("tokens_per_chip", per_chip, "tokens");
    r.add("tokens_per_replica", per_chip * static_cast<double>(m.y), "tokens");
    r.add("global_batch", global, "tokens");
    // The three times at that batch, per block: the compute time covers both transfers.
    r.add("math_us", m.math_seconds(global, d_model, d_ff) * 1e6, "us");
    r.add("fsdp_comm_us", m.fsdp_seconds(d_model, d_ff) * 1e6, "us");
    r.add("tp_comm_us", m.tp_seconds(global, d_model) * 1e6, "us");
    derivation += "; B = " + fixed(per_chip, 0) + " x " + std::to_string(m.chips()) + " = " + fixed(global, 0) + " tokens";
  } else {
    r.add_text("tokens_per_chip", "never (TP-bound)");
    r.add_text("global_batch", "never (TP-bound)");
    derivation += ", Y = " + std::to_string(m.y) + " is communication-bound at any batch";
  }
  r.add_text("derivation", derivation);
  return r;
}

class CommunicationAccounting : public runner::Task {
 public:
  void run(runner::Context&, const runner::Params& p, runner::Recorder& out) override {
    out.emit(p.text("quantity") == "memory" ? memory_record(p) : mesh_record(p));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "communication_accounting";
  m.version = "1";
  m.description = "analytic memory (whole, FSDP) and compute-bound batch (FSDP x TP mesh) of a feed-forward stack";
  m.options = {
      runner::opt_enum("quantity", {"memory", "compute_bound_batch"}, "memory",
                       "memory: model state + saved activations, whole and per FSDP device; "
                       "compute_bound_batch: smallest per-chip batch with compute >= communication"),
      runner::opt_int("d_model", 16384, "residual width D").in_range(1, 1 << 24),
      runner::opt_int("d_ff", 53248, "feed-forward width F").in_range(1, 1 << 26),
      runner::opt_int("blocks", 126, "feed-forward blocks (two linear layers each)").in_range(1, 1 << 16),
      runner::opt_float("weight_bytes", 4.0, "bytes per master weight (fp32: 4)").in_range(0, 64),
      runner::opt_float("gradient_bytes", 4.0, "bytes per accumulated gradient (fp32: 4)").in_range(0, 64),
      runner::opt_float("optimizer_bytes", 8.0, "optimizer state bytes per parameter (AdamW fp32 m, v: 8)").in_range(0, 64),
      runner::opt_float("activation_bytes", 2.0, "bytes per saved activation (bf16: 2)").in_range(0, 64),
      runner::opt_int("tokens", 0, "tokens per device whose activations are saved for backward").in_range(0, 1e12),
      runner::opt_float("activation_sharded_fraction", 0.5, "share of activations sharded with FSDP").in_range(0, 1),
      runner::opt_int("devices", 1, "FSDP devices N").in_range(1, 1 << 24),
      runner::opt_float("device_memory_gb", 80.0, "memory per device in GB (1e9 B)").at_least(1e-9),
      runner::opt_float("chip_flops", 4.6e14, "chip bf16 FLOP/s C").at_least(1),
      runner::opt_float("ici_bandwidth", 1.8e11, "bidirectional ICI bytes/s per axis W").at_least(1),
      runner::opt_int("mesh_x", 16, "FSDP degree X").in_range(1, 1 << 20),
      runner::opt_int("mesh_y", 4, "tensor-parallel degree Y").in_range(1, 1 << 20),
      runner::opt_float("axes_x", 2.0, "ICI axes the FSDP dimension spans, M_X").in_range(1, 8),
      runner::opt_float("axes_y", 1.0, "ICI axes the TP dimension spans, M_Y").in_range(1, 8),
      runner::opt_float("weight_comm_bytes", 2.0, "bytes per weight in FSDP all-gathers (bf16: 2)").in_range(0.125, 8),
      runner::opt_float("activation_comm_bytes", 2.0, "bytes per activation in TP collectives (bf16: 2)").in_range(0.125, 8),
      runner::opt_string("trick", "baseline", "name of the variant, shown in tables"),
  };
  // By quantity; "?": the batch's times only where TP is compute-bound.
  const std::string memory = " if quantity=memory", mesh = " if quantity=compute_bound_batch";
  m.metrics = std::vector<std::string>{
      "parameters" + memory, "weights_gb" + memory, "gradients_gb" + memory, "optimizer_state_gb" + memory,
      "model_state_gb" + memory, "activations_per_token_mb" + memory, "activations_gb" + memory,
      "single_device_gb" + memory, "devices_to_hold" + memory, "per_device_gb" + memory, "fits" + memory,
      "smallest_devices" + memory, "smallest_derivation" + memory, "derivation", "trick" + mesh, "chips" + mesh,
      "alpha" + mesh, "fsdp_tokens_per_chip" + mesh, "max_tp_degree" + mesh, "tp_compute_bound" + mesh,
      "best_tokens_per_chip" + mesh, "tokens_per_chip" + mesh, "tokens_per_replica?", "global_batch" + mesh,
      "math_us?", "fsdp_comm_us?", "tp_comm_us?"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<CommunicationAccounting>();
  };
  return m;
}

}  // namespace
}  // namespace plugins::communication_accounting

RUNNER_PLUGIN(plugins::communication_accounting::make_manifest)
