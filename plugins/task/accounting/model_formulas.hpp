// Analytic answers about the measured model runs, free of LibTorch so the tests
// check them against hand-worked numbers. Sizes in bytes unless a name says so.
#pragma once
#include <cmath>
#include <cstdint>

namespace plugins::accounting {

// Naive attention without a head dimension (pytorch_attention): q, k, v are b x s x d,
// the score, scaled-score and softmax matrices b x s x s; `e` bytes per element.
struct NaiveAttention {
  double b = 0, s = 0, d = 0, e = 4;

  double matrix() const { return b * s * s * e; }
  double vectors(double count) const { return count * b * s * d * e; }
  // Autograd keeps q, k (for the score matmul), v and the softmax output P.
  double saved() const { return vectors(3) + matrix(); }
  // What is allocated when backward starts: saved + the output and dO.
  double before_backward() const { return vectors(5) + matrix(); }
  // The forward holds q, k, v and the three s x s matrices at once (scores,
  // scaled scores, P) before the temporaries are freed.
  double forward_peak() const { return vectors(3) + 3 * matrix(); }
  // Backward adds dP and dS (two s x s) and dq, dk, dv.
  double backward_peak() const { return before_backward() + 2 * matrix() + vectors(3); }
};

// One forward of the transformer LM (matmul FLOPs: 2 per multiply-add).
struct ForwardFlops {
  double b = 0, s = 0, d = 0, d_ff = 0, layers = 0, heads = 0, vocab = 0;
  double softmax_per_element = 5;  // max, subtract, exp, sum, divide

  double linear() const { return layers * 2 * b * s * (4 * d * d + 3 * d * d_ff); }  // q, k, v, o; w1, w3, w2
  double lm_head() const { return 2 * b * s * d * vocab; }
  double attention_scores() const { return layers * 2 * b * s * s * d; }  // all heads: h x 2 s^2 d_head
  double attention_values() const { return attention_scores(); }
  double softmax() const { return layers * b * heads * s * s * softmax_per_element; }
  double total() const { return linear() + lm_head() + attention_scores() + attention_values() + softmax(); }
  // = softmax_per_element / (4 d_head)
  double softmax_per_attention_matmul() const { return softmax() / (attention_scores() + attention_values()); }
};

// DDP with n_b equal buckets (ddp_overlap_bucketed (b)): each bucket's gradients
// take as long to compute as to all-reduce, so every bucket but the last hides
// behind backward; each call costs o on top of bytes / w. Overhead after backward:
//   overhead(n_b) = n_b o + s / (n_b w),  minimal at n_b* = sqrt(s / (w o)),
//   i.e. bucket size s / n_b* = sqrt(s w o), with overhead 2 sqrt(s o / w).
struct BucketModel {
  double s = 0;  // bytes of gradients
  double w = 0;  // all-reduce algorithm bandwidth, bytes/s
  double o = 0;  // seconds per call

  double buckets(double bucket_bytes) const { return std::ceil(s / bucket_bytes); }
  double overhead(double n_b) const { return n_b * o + s / (n_b * w); }
  // When the calls themselves overlap backward too, only the last bucket is left.
  double last_bucket(double n_b) const { return o + s / (n_b * w); }
  double best_buckets() const { return std::sqrt(s / (w * o)); }
  double best_bucket_bytes() const { return std::sqrt(s * w * o); }
  double best_overhead() const { return 2 * std::sqrt(s * o / w); }
};

// Least-squares line time = o + bytes / w through measured all-reduce points.
struct LineFit {
  double intercept = 0, slope = 0;
};
template <class Points>
LineFit fit_line(const Points& points) {  // points: pairs (x, y)
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  LineFit f;
  const double denominator = n * sxx - sx * sx;
  if (n < 2 || denominator == 0) return f;
  f.slope = (n * sxy - sx * sy) / denominator;
  f.intercept = (sy - f.slope * sx) / n;
  return f;
}

// Per-rank memory and per-step traffic of P fp32 parameters trained with AdamW
// on n ranks (optimizer_state_sharding_accounting). Traffic is what one rank
// sends with ring collectives: all-reduce 2 (n-1)/n M, reduce-scatter and
// all-gather (n-1)/n M each, a broadcast of every rank's shard (n-1)/n M.
enum class Scheme { Unsharded, Sharded, Zero1, Zero1Mixed };
struct ShardingMemory {
  double weights = 0, gradients = 0, optimizer_state = 0, traffic = 0;
  double total() const { return weights + gradients + optimizer_state; }
};
inline ShardingMemory sharding_memory(Scheme scheme, double p, double n) {
  const double ring = (n - 1) / n;
  ShardingMemory m;
  switch (scheme) {
    case Scheme::Unsharded:  // DDP: every rank holds everything, all-reduces gradients
      m = {4 * p, 4 * p, 8 * p, 2 * ring * 4 * p};
      break;
    case Scheme::Sharded:  // all-reduce gradients, step own shard, broadcast updated shards
      m = {4 * p, 4 * p, 8 * p / n, 2 * ring * 4 * p + ring * 4 * p};
      break;
    case Scheme::Zero1:  // reduce-scatter gradients, step own shard, all-gather weights
      m = {4 * p, 4 * p, 8 * p / n, ring * 4 * p + ring * 4 * p};
      break;
    case Scheme::Zero1Mixed:  // the ZeRO paper's setting: fp16 weights and gradients, fp32 master + m + v sharded
      m = {2 * p, 2 * p, 12 * p / n, ring * 2 * p + ring * 2 * p};
      break;
  }
  return m;
}

}  // namespace plugins::accounting
