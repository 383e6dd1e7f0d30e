#include "history/verdict_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "history/mann_whitney.hpp"

namespace runner::history {
namespace {

// splitmix64: small, fast, and the same numbers on every platform.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

std::uint64_t seed_of(const std::vector<double>& a, const std::vector<double>& b) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const auto* v : {&a, &b})
    for (double x : *v) {
      std::uint64_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      h = (h ^ bits) * 1099511628211ULL;
    }
  return h;
}

double median_in_place(std::vector<double>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// One moving-block resample of x (circular, so every step is equally likely).
void resample(const std::vector<double>& x, int block, Random& rng, std::vector<double>& out) {
  out.clear();
  const size_t n = x.size();
  while (out.size() < n) {
    const size_t start = rng.below(n);
    for (int k = 0; k < block && out.size() < n; ++k) out.push_back(x[(start + static_cast<size_t>(k)) % n]);
  }
}

double mean_of(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0) / x.size(); }

}  // namespace

double lag1_autocorrelation(const std::vector<double>& x) {
  if (x.size() < 3) return 0;
  const double m = mean_of(x);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    den += (x[i] - m) * (x[i] - m);
    if (i + 1 < x.size()) num += (x[i] - m) * (x[i + 1] - m);
  }
  return den > 0 ? num / den : 0;
}

int block_length(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  const double r = std::clamp(lag1_autocorrelation(x), 0.0, 0.95);
  // (1 + r) / (1 - r): the integrated autocorrelation time of an AR(1) series;
  // twice it, because r from a short series is biased low.
  const double want = std::max(std::cbrt(n), 2 * (1 + r) / (1 - r));
  return std::max(1, std::min(static_cast<int>(std::ceil(want)), static_cast<int>(n / 3)));
}

BootstrapResult block_bootstrap_log_ratio(const std::vector<double>& a, const std::vector<double>& b, int resamples) {
  BootstrapResult out;
  if (a.size() < 2 || b.size() < 2) return out;
  std::vector<double> sa = a, sb = b;
  const double ma = median_in_place(sa), mb = median_in_place(sb);
  if (ma <= 0 || mb <= 0) return out;
  out.log_ratio = std::log(mb / ma);
  out.block = std::max(block_length(a), block_length(b));
  out.resamples = resamples;
  Random rng{seed_of(a, b)};
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < resamples; ++i) {
    resample(a, out.block, rng, sa);
    resample(b, out.block, rng, sb);
    const double ra = median_in_place(sa), rb = median_in_place(sb);
    const double d = (ra > 0 && rb > 0) ? std::log(rb / ra) : 0.0;
    sum += d;
    sum_sq += d * d;
  }
  const double mean = sum / resamples;
  out.spread = std::sqrt(std::max(0.0, sum_sq / resamples - mean * mean));
  // Studentized with as many degrees of freedom as there are blocks, less
  // one a side: 60 steps in blocks of 16 hold about 7 independent values, and
  // a normal tail (or the percentile p) would treat them as 60 (A/A
  // simulations, AR(1) r = 0.8 over 60 steps: 9 % flagged at alpha 0.05
  // against 17 % for the percentile p and 47 % for a U test over steps).
  out.df = std::max(1.0, static_cast<double>(a.size()) / out.block - 1 + static_cast<double>(b.size()) / out.block - 1);
  if (out.spread > 0) out.p_value = student_t_two_sided(out.log_ratio / out.spread, out.df);
  else out.p_value = out.log_ratio == 0 ? 1.0 : 0.0;
  return out;
}

double log_welch_p(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return 1;
  auto logs = [](const std::vector<double>& x, double& mean, double& sd) {
    std::vector<double> l;
    for (double v : x) {
      if (!(v > 0)) return false;
      l.push_back(std::log(v));
    }
    mean = mean_of(l);
    double ss = 0;
    for (double v : l) ss += (v - mean) * (v - mean);
    sd = std::sqrt(ss / (l.size() - 1));
    return true;
  };
  double ma, sa, mb, sb;
  if (!logs(a, ma, sa) || !logs(b, mb, sb)) return 1;
  return welch_t_p(ma, sa, static_cast<double>(a.size()), mb, sb, static_cast<double>(b.size()));
}

namespace {

void segment(const std::vector<double>& logs, size_t lo, size_t hi, double threshold, double alpha,
             std::vector<ChangePoint>& out) {
  const size_t n = hi - lo;
  if (n < 3) return;
  ChangePoint best;
  double best_t = 0;
  for (size_t k = lo + 1; k < hi; ++k) {
    const double n1 = static_cast<double>(k - lo), n2 = static_cast<double>(hi - k);
    double m1 = 0, m2 = 0;
    for (size_t i = lo; i < k; ++i) m1 += logs[i];
    for (size_t i = k; i < hi; ++i) m2 += logs[i];
    m1 /= n1;
    m2 /= n2;
    const double ratio = std::exp(m2 - m1);
    if (std::fabs(ratio - 1) <= threshold) continue;
    double ss = 0;
    for (size_t i = lo; i < hi; ++i) ss += (logs[i] - (i < k ? m1 : m2)) * (logs[i] - (i < k ? m1 : m2));
    const double sp = std::sqrt(ss / static_cast<double>(n - 2));
    const double t = sp > 0 ? std::fabs(m2 - m1) / (sp * std::sqrt(1 / n1 + 1 / n2)) : INFINITY;
    if (t > best_t) {
      best_t = t;
      best = {k, ratio, std::isinf(t) ? 0.0 : student_t_two_sided(t, static_cast<double>(n - 2))};
    }
  }
  if (best_t == 0 || best.p_value * static_cast<double>(n - 1) >= alpha) return;
  out.push_back(best);
  segment(logs, lo, best.at, threshold, alpha, out);
  segment(logs, best.at, hi, threshold, alpha, out);
}

}  // namespace

std::vector<ChangePoint> change_points(const std::vector<double>& series, double threshold, double alpha) {
  std::vector<double> logs;
  for (double v : series) {
    if (!(v > 0)) return {};
    logs.push_back(std::log(v));
  }
  std::vector<ChangePoint> out;
  segment(logs, 0, logs.size(), threshold, alpha, out);
  std::sort(out.begin(), out.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.at < b.at; });
  return out;
}

std::vector<double> benjamini_hochberg(const std::vector<double>& p) {
  const size_t m = p.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p[i] < p[j]; });
  std::vector<double> q(m, 1.0);
  double running = 1.0;
  for (size_t k = m; k-- > 0;) {
    running = std::min(running, p[order[k]] * static_cast<double>(m) / static_cast<double>(k + 1));
    q[order[k]] = std::min(1.0, running);
  }
  return q;
}

// Recurrence up to 10, then the asymptotic series (error below 1e-13 there).
double digamma(double x) {
  double r = 0;
  for (; x < 10; x += 1) r -= 1 / x;
  const double f = 1 / (x * x);
  return r + std::log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

double trigamma(double x) {
  double r = 0;
  for (; x < 10; x += 1) r += 1 / (x * x);
  const double f = 1 / (x * x);
  return r + 1 / x + f / 2 + f / x * (1.0 / 6 - f * (1.0 / 30 - f * (1.0 / 42 - f / 30)));
}

namespace {

// x with trigamma(x) = y: trigamma falls monotonically, so bisect on a log scale.
double trigamma_inverse(double y) {
  double lo = 1e-8, hi = 1e8;
  for (int i = 0; i < 200 && hi / lo > 1 + 1e-12; ++i) {
    const double mid = std::sqrt(lo * hi);
    (trigamma(mid) > y ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

}  // namespace

VariancePrior variance_prior(const std::vector<double>& variances, const std::vector<double>& dfs) {
  std::vector<double> e;
  double trigamma_sum = 0;
  for (size_t i = 0; i < variances.size() && i < dfs.size(); ++i) {
    if (!(variances[i] > 0) || !(dfs[i] > 0) || !std::isfinite(variances[i])) continue;
    const double half = dfs[i] / 2;
    e.push_back(std::log(variances[i]) - digamma(half) + std::log(half));
    trigamma_sum += trigamma(half);
  }
  if (e.size() < 3) return {};
  const double n = static_cast<double>(e.size());
  const double mean = mean_of(e);
  double ss = 0;
  for (double v : e) ss += (v - mean) * (v - mean);
  const double excess = ss / (n - 1) - trigamma_sum / n;
  if (excess <= 0) return {INFINITY, std::exp(mean)};
  const double df = 2 * trigamma_inverse(excess);
  return {df, std::exp(mean + digamma(df / 2) - std::log(df / 2))};
}

}  // namespace runner::history
