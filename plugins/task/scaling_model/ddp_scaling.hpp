// DDP step time on N GPUs predicted from a measured one-GPU step and measured
// all-reduce times; free of LibTorch so the tests check it against hand-worked
// numbers. Seconds and bytes unless a name says otherwise.
//
//   all-reduce of x bytes on n ranks:  t(x, n) = alpha_n + 2 (n-1)/n * x / busbw_n
//   (alpha and busbw fitted per measured process count; a count without rows
//   inside a node takes the nearest measured count's; across nodes busbw is
//   min(NVLink, network) and alpha grows by one network latency per tree level)
//
//   buckets: the gradients in reverse parameter order, packed as ddp/bucketed
//   packs them; a bucket is ready when backward has done the FLOPs up to its
//   last gradient; buckets are all-reduced one after another on one stream.
//   exposed = end of the last all-reduce - end of backward (>= 0).
//   interference: backward is slowed by kappa x the bytes all-reduced beside it
//   (ring traffic per rank; NCCL's kernels share HBM bandwidth with backward's,
//   so the cost follows bytes moved, not seconds spent waiting on a network).
//   step_N = step_1 + (backward_N - backward_1) + exposed.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

namespace plugins::scaling_model {

// time = alpha + beta * bytes, minimizing the squared *relative* error, so the
// 1 MB point weighs as much as the 1 GB point (a plain least-squares line is
// decided by the largest sizes and leaves alpha to chance).
struct AlphaBeta {
  double alpha = 0;  // s
  double beta = 0;   // s per byte
};
inline AlphaBeta fit_relative(const std::vector<std::pair<double, double>>& bytes_seconds) {
  // Weighted least squares, weight 1 / t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, t] : bytes_seconds) {
    const double w = 1.0 / (t * t);
    sw += w;
    sx += w * x;
    sy += w * t;
    sxx += w * x * x;
    sxy += w * x * t;
  }
  AlphaBeta f;
  const double det = sw * sxx - sx * sx;
  if (bytes_seconds.size() < 2 || det == 0) return f;
  f.beta = (sw * sxy - sx * sy) / det;
  f.alpha = (sy - f.beta * sx) / sw;
  return f;
}

// The ring's traffic factor: each rank sends 2 (n-1)/n of the buffer.
inline double ring_factor(double n) { return n > 1 ? 2 * (n - 1) / n : 0; }

struct Link {
  double alpha = 0;  // s per all-reduce
  double busbw = 0;  // bytes/s
};

// A fit at p ranks gives that count's link: busbw = ring_factor(p) / beta.
inline Link link_from_fit(const AlphaBeta& f, double p) { return {f.alpha, ring_factor(p) / f.beta}; }

struct AllReduceModel {
  std::map<int, Link> measured;  // per process count within one node
  int gpus_per_node = 8;
  Link network;  // alpha: latency per tree level; busbw: per GPU across nodes

  int nodes(int n) const { return (n + gpus_per_node - 1) / gpus_per_node; }
  // The measured count a node of min(n, gpus_per_node) ranks borrows from: itself,
  // else the largest measured count below it, else the smallest above.
  int source_count(int n) const {
    const int local = std::min(n, gpus_per_node);
    int best = measured.begin()->first;
    for (const auto& [p, link] : measured)
      if (p <= local) best = p;
    return best;
  }
  Link link(int n) const {
    Link l = measured.at(source_count(n));
    const int k = nodes(n);
    if (k > 1) {
      l.alpha += 2 * std::ceil(std::log2(static_cast<double>(k))) * network.alpha;  // up and down a tree
      l.busbw = std::min(l.busbw, network.busbw);
    }
    return l;
  }
  double time(double bytes, int n) const {
    if (n <= 1 || bytes <= 0) return 0;
    const Link l = link(n);
    return l.alpha + ring_factor(n) * bytes / l.busbw;
  }
};

// One parameter's gradient, in the order backward produces them, with the
// backward FLOPs done up to and including it.
struct Gradient {
  double bytes = 0;
  double flops = 0;  // backward FLOPs spent before this gradient is ready (its own included)
};

// transformer_lm's parameters (registration order: embedding; per layer ln1, q,
// k, v, o, ln2, w1, w2, w3; ln_final; lm_head), reversed as backward reaches
// them. Backward FLOPs: 4 T x numel per weight matrix (dX and dW), 8 b s^2 d per
// layer for attention (twice its forward), nothing for norms and the embedding.
struct TransformerShape {
  double d_model = 0, d_ff = 0, layers = 0, vocab = 0, batch = 0, context = 0;
  double parameters() const { return 2 * vocab * d_model + d_model + layers * (4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model); }
};
inline std::vector<Gradient> transformer_gradients(const TransformerShape& s, double gradient_bytes) {
  const double tokens = s.batch * s.context;
  std::vector<Gradient> out;
  double done = 0;
  auto add = [&](double numel, double flops) {
    done += flops;
    out.push_back({numel * gradient_bytes, done});
  };
  const double dd = s.d_model * s.d_model, dff = s.d_model * s.d_ff;
  add(s.vocab * s.d_model, 4 * tokens * s.vocab * s.d_model);  // lm_head
  add(s.d_model, 0);                                            // ln_final
  for (int layer = 0; layer < static_cast<int>(s.layers); ++layer) {
    for (int w = 0; w < 3; ++w) add(dff, 4 * tokens * dff);  // w3, w2, w1
    add(s.d_model, 0);                                         // ln2
    add(dd, 4 * tokens * dd);                                  // o
    add(dd, 4 * tokens * dd + 8 * s.batch * s.context * s.context * s.d_model);  // v, after attention
    add(dd, 4 * tokens * dd);                                                    // k
    add(dd, 4 * tokens * dd);                                                    // q
    add(s.d_model, 0);                                                           // ln1
  }
  add(s.vocab * s.d_model, 0);  // token embeddings
  return out;
}

struct Bucket {
  double bytes = 0;
  double ready = 0;  // fraction of backward done when its last gradient is ready
};
// ddp/bucketed's packing: in backward order, a gradient joins the open bucket
// while the bucket stays within the cap; a larger one gets its own.
inline std::vector<Bucket> pack_buckets(const std::vector<Gradient>& grads, double cap_bytes) {
  std::vector<Bucket> out;
  if (grads.empty()) return out;
  const double total = grads.back().flops;
  for (const Gradient& g : grads) {
    if (out.empty() || out.back().bytes + g.bytes > cap_bytes) out.push_back({});
    out.back().bytes += g.bytes;
    out.back().ready = total > 0 ? g.flops / total : 1;
  }
  return out;
}

struct StepTimes {
  double step = 0, forward = 0, backward = 0, optimizer = 0;  // one GPU, measured
};

struct Prediction {
  double step = 0, backward = 0, exposed = 0;
  double allreduce = 0;     // sum of the buckets' all-reduce times
  double beside = 0;        // all-reduce time that runs while backward does
  double beside_bytes = 0;  // ring traffic per rank moved while backward runs
  double efficiency = 1; // step_1 / step_N (weak scaling)
};

// The all-reduce stream for backward lasting `backward` seconds.
inline Prediction schedule(const std::vector<Bucket>& buckets, const AllReduceModel& net, int n, double backward) {
  Prediction p;
  p.backward = backward;
  double end = 0;
  for (const Bucket& b : buckets) {
    const double t = net.time(b.bytes, n);
    const double start = std::max(b.ready * backward, end);
    end = start + t;
    const double overlap = std::max(0.0, std::min(end, backward) - start);
    p.allreduce += t;
    p.beside += overlap;
    if (t > 0) p.beside_bytes += overlap / t * ring_factor(n) * b.bytes;
  }
  p.exposed = std::max(0.0, end - backward);
  return p;
}

// kappa (s per byte) from a measured run: its backward over the one-GPU backward,
// per byte all-reduced beside it (predicted for the measured backward's length).
inline double calibrate_interference(const std::vector<Bucket>& buckets, const AllReduceModel& net, int n,
                                     double backward_1, double backward_measured) {
  const Prediction p = schedule(buckets, net, n, backward_measured);
  return p.beside_bytes > 0 ? (backward_measured - backward_1) / p.beside_bytes : 0;
}

inline Prediction predict(const StepTimes& one, const std::vector<Bucket>& buckets, const AllReduceModel& net, int n,
                          double kappa) {
  if (n <= 1) {
    Prediction p;
    p.step = one.step;
    p.backward = one.backward;
    return p;
  }
  // backward_N = backward_1 + kappa * beside_bytes(backward_N): a fixed point
  // (a longer backward hides more of the traffic, which grows by less than it).
  double backward = one.backward;
  Prediction p;
  for (int i = 0; i < 200; ++i) {
    p = schedule(buckets, net, n, backward);
    const double next = one.backward + kappa * p.beside_bytes;
    if (std::abs(next - backward) < 1e-12) break;
    backward = next;
  }
  p.step = one.step + (p.backward - one.backward) + p.exposed;
  p.efficiency = one.step / p.step;
  return p;
}

}  // namespace plugins::scaling_model
