#include "history/mann_whitney.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace runner::history {
namespace {

// P(U >= u) under the null hypothesis, from the exact distribution of U for
// sizes m (small) and n: the coefficients of the Gaussian binomial
// [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), in exact 128-bit
// integers (each partial product is itself a Gaussian binomial, so every
// division by (1 - q^i) is exact).
double exact_sf(int m, int n, long u) {
  const int max_u = m * n;
  std::vector<__int128> c(static_cast<size_t>(max_u) + 1, 0);
  c[0] = 1;
  for (int i = 1; i <= m; ++i) {
    const int shift = n + i;
    for (int k = max_u; k >= shift; --k) c[k] -= c[k - shift];
    for (int k = i; k <= max_u; ++k) c[k] += c[k - i];
  }
  long double total = 0, tail = 0;
  for (int k = 0; k <= max_u; ++k) {
    total += static_cast<long double>(c[k]);
    if (k >= u) tail += static_cast<long double>(c[k]);
  }
  return static_cast<double>(tail / total);
}

// The exact counts fit in 128 bits while C(m+n, m) < 2^126 (headroom for the
// intermediate differences); larger problems use the normal approximation.
bool exact_fits(int m, int n) {
  long double log2_binomial = 0;
  for (int i = 1; i <= m; ++i) log2_binomial += std::log2(static_cast<long double>(n + i) / i);
  return log2_binomial < 120 && static_cast<long>(m) * n <= 2'000'000;
}

}  // namespace

UTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  UTest result;
  const size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0) return result;
  const size_t n = n1 + n2;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto value = [&](size_t i) { return i < n1 ? a[i] : b[i - n1]; };
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return value(x) < value(y); });

  // Average ranks over ties; tie_term = sum(t^3 - t) over groups of equal values.
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && value(order[j + 1]) == value(order[i])) ++j;
    const double t = static_cast<double>(j - i + 1);
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    for (size_t k = i; k <= j; ++k)
      if (order[k] < n1) rank_sum_a += rank;
    i = j + 1;
  }
  const double d1 = static_cast<double>(n1), d2 = static_cast<double>(n2);
  const double u1 = rank_sum_a - d1 * (d1 + 1) / 2;
  const double u2 = d1 * d2 - u1;
  const double u = std::max(u1, u2);
  result.u = u1;

  const int small = static_cast<int>(std::min(n1, n2)), large = static_cast<int>(std::max(n1, n2));
  if ((n1 <= 8 || n2 <= 8) && !ties && exact_fits(small, large)) {
    result.exact = true;
    result.p_value = 2 * exact_sf(small, large, std::lround(u));
  } else {
    const double dn = static_cast<double>(n);
    const double sigma = std::sqrt(d1 * d2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1))));
    const double z = (u - d1 * d2 / 2 - 0.5) / sigma;
    result.p_value = sigma > 0 ? 2 * 0.5 * std::erfc(z / std::sqrt(2.0)) : 1.0;
  }
  result.p_value = std::clamp(result.p_value, 0.0, 1.0);
  return result;
}

namespace {

// Continued fraction of the regularized incomplete beta function I_x(a, b)
// (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    for (const double num : {m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                             -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))}) {
      d = 1 + num * d;
      d = 1 / (std::fabs(d) < tiny ? tiny : d);
      c = 1 + num / c;
      if (std::fabs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (std::fabs(d * c - 1) < eps) break;
  }
  return h;
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

}  // namespace

double student_t_two_sided(double t, double df) {
  if (!std::isfinite(t)) return 0;
  return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

double welch_t_p(double mean_a, double std_a, double n_a, double mean_b, double std_b, double n_b) {
  const double va = std_a * std_a / n_a, vb = std_b * std_b / n_b;
  if (va + vb <= 0) return mean_a == mean_b ? 1 : 0;
  const double t = (mean_b - mean_a) / std::sqrt(va + vb);
  const double df = (va + vb) * (va + vb) / (va * va / (n_a - 1) + vb * vb / (n_b - 1));
  return student_t_two_sided(t, df);
}

}  // namespace runner::history
