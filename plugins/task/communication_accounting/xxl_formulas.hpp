// Formulas of the spec's communication_accounting question, free of LibTorch so
// the tests check them against hand-worked numbers.
//
// The model is a stack of `blocks` feed-forward blocks, each two linear layers
// (d_model -> d_ff -> d_model, no activation function, no bias): 2 d_model d_ff
// parameters per block. Memory is in decimal GB (1e9 bytes), as the devices are named.
//
// Compute-bound batch (Scaling Book notation, forward pass of one block): a mesh of
// N = X * Y chips, X-way FSDP over M_X ICI axes, Y-way tensor parallelism over M_Y
// axes, chip FLOP/s C, bidirectional ICI bandwidth W per axis, alpha = C / W. With B
// tokens in the global batch, b_w bytes per communicated weight, b_a per activation:
//   T_math = 2 matmuls x 2 B D F / (N C)
//   T_fsdp = 2 x (D F b_w / Y) / (W M_X)   (AllGather each weight's TP slice over X)
//   T_tp   = 2 x (B D b_a / X) / (W M_Y)   (AllGather in / ReduceScatter out over Y)
// Communication overlaps compute, so a step is compute-bound when T_math >= both:
//   T_math >= T_fsdp  <=>  B / N >= (b_w / 2) alpha / (Y M_X)
//   T_math >= T_tp    <=>  F >= (b_a / 2) Y alpha / M_Y       (independent of B)
// D cancels. Choosing Y as large as the TP condition allows gives the smallest
// per-chip batch, (b_w / 2)(b_a / 2) alpha^2 / (M_X M_Y F).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace plugins::communication_accounting {

inline constexpr double kBytesPerGB = 1e9;

struct FfnStack {
  std::int64_t d_model = 0, d_ff = 0, blocks = 0;
  double weight_bytes = 4, gradient_bytes = 4, optimizer_bytes = 8;  // per parameter: fp32, fp32, AdamW m+v
  double activation_bytes = 2;                                        // bf16

  double parameters() const { return 2.0 * static_cast<double>(blocks) * d_model * d_ff; }
  double weights() const { return parameters() * weight_bytes; }
  double gradients() const { return parameters() * gradient_bytes; }
  double optimizer_state() const { return parameters() * optimizer_bytes; }
  double model_state() const { return weights() + gradients() + optimizer_state(); }
  // Saved for backward without checkpointing: each linear layer's input, d_model
  // wide for the first and d_ff wide for the second.
  double activations_per_token() const { return static_cast<double>(blocks) * (d_model + d_ff) * activation_bytes; }
};

// Bytes per device when model state and a fraction `sharded` of the activations
// are split over n devices and the rest of the activations stays whole.
inline double fsdp_bytes_per_device(const FfnStack& s, double tokens, double sharded, std::int64_t n) {
  const double activations = s.activations_per_token() * tokens;
  return (s.model_state() + sharded * activations) / static_cast<double>(n) + (1.0 - sharded) * activations;
}

// Smallest n with fsdp_bytes_per_device < limit; 0 when no n fits (the unsharded
// activations alone reach the limit).
inline std::int64_t smallest_fsdp_devices(const FfnStack& s, double tokens, double sharded, double limit_bytes) {
  const double activations = s.activations_per_token() * tokens;
  const double room = limit_bytes - (1.0 - sharded) * activations;
  if (room <= 0) return 0;
  // n > shardable / room; floor + 1 also handles an exact quotient (strictly under).
  const double shardable = s.model_state() + sharded * activations;
  std::int64_t n = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(shardable / room)) + 1);
  while (n > 1 && fsdp_bytes_per_device(s, tokens, sharded, n - 1) < limit_bytes) --n;  // guard rounding
  while (fsdp_bytes_per_device(s, tokens, sharded, n) >= limit_bytes) ++n;
  return n;
}

struct Mesh {
  double chip_flops = 0;     // C, FLOP/s
  double ici_bandwidth = 0;  // W, bytes/s per axis, bidirectional
  std::int64_t x = 1, y = 1;  // FSDP and TP degrees
  double axes_x = 1, axes_y = 1;  // M_X, M_Y
  double weight_comm_bytes = 2, activation_comm_bytes = 2;

  double alpha() const { return chip_flops / ici_bandwidth; }
  std::int64_t chips() const { return x * y; }
  // B / N at which T_math = T_fsdp.
  double fsdp_tokens_per_chip() const { return weight_comm_bytes / 2.0 * alpha() / (static_cast<double>(y) * axes_x); }
  // Largest Y with T_math >= T_tp for this d_ff.
  double max_tp_degree(std::int64_t d_ff) const {
    return static_cast<double>(d_ff) * axes_y / (activation_comm_bytes / 2.0 * alpha());
  }
  bool tp_compute_bound(std::int64_t d_ff) const { return static_cast<double>(y) <= max_tp_degree(d_ff); }
  // Smallest B / N over every real Y (Y at max_tp_degree).
  double best_tokens_per_chip(std::int64_t d_ff) const {
    return weight_comm_bytes / 2.0 * activation_comm_bytes / 2.0 * alpha() * alpha() /
           (axes_x * axes_y * static_cast<double>(d_ff));
  }
  // Per block, forward, at global batch b tokens (seconds).
  double math_seconds(double b, std::int64_t d_model, std::int64_t d_ff) const {
    return 4.0 * b * static_cast<double>(d_model) * d_ff / (static_cast<double>(chips()) * chip_flops);
  }
  double fsdp_seconds(std::int64_t d_model, std::int64_t d_ff) const {
    return 2.0 * static_cast<double>(d_model) * d_ff * weight_comm_bytes / static_cast<double>(y) / (ici_bandwidth * axes_x);
  }
  double tp_seconds(double b, std::int64_t d_model) const {
    return 2.0 * b * static_cast<double>(d_model) * activation_comm_bytes / static_cast<double>(x) / (ici_bandwidth * axes_y);
  }
};

}  // namespace plugins::communication_accounting
