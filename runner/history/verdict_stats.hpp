// The statistics behind compare's verdicts, with known error rates:
// - per-step samples are autocorrelated (a slow stretch of steps, a clock that
//   ramps), so treating them as independent (a U or t test over steps) claims
//   far more certainty than they hold. block_bootstrap_log_ratio resamples
//   blocks of consecutive steps and tests the ratio of medians.
// - repetition means are batch means: close to independent, so a Welch t over
//   their logs (a ratio test) is honest even when the steps are not.
// - many points are tested at once: benjamini_hochberg turns their p-values into
//   q-values that bound the expected share of false alarms among flagged points.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace runner::history {

struct BootstrapResult {
  double log_ratio = 0;  // log(median(b) / median(a))
  double p_value = 1;    // two-sided: log_ratio / spread against Student's t with df
  double spread = 0;     // standard deviation of the resampled log ratios
  double df = 1;         // blocks on both sides, less one a side
  int block = 1;         // block length in steps
  int resamples = 0;
};

// Circular block bootstrap of log(median b / median a), studentized: the
// resampled spread scales the observed log ratio, read against Student's t
// with the number of blocks as degrees of freedom. Only the spread is taken
// from the resamples, so a few hundred are enough (a compare tests 10,000s). The block length grows
// with n (n^(1/3)) and with the lag-1 autocorrelation of either side, so that
// a block spans what one step remembers of the ones before. Deterministic for given
// samples (the generator is seeded from them). Needs at least 2 values a side.
BootstrapResult block_bootstrap_log_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                          int resamples = 400);

// Block length for a series: max(n^(1/3), 2 (1 + r1) / (1 - r1)) rounded up,
// capped at n / 3 (at least 1), r1 the lag-1 autocorrelation (0 when negative).
int block_length(const std::vector<double>& x);
double lag1_autocorrelation(const std::vector<double>& x);

// Welch's t over log values (batch means of repetitions): two-sided p of
// "the geometric means are equal". Needs 2 values a side, all positive; else 1.
double log_welch_p(const std::vector<double>& a, const std::vector<double>& b);

// Steps in a series of per-run values (oldest first), found over the whole
// series rather than between neighbours: binary segmentation, each split
// tested with a pooled two-sample t over the logs of the two segments (so the
// series' own run-to-run spread is the noise), Bonferroni over the splits
// tried, kept when significant at alpha and the ratio of the segments' means
// is beyond the threshold. `at` is the first run after the step.
struct ChangePoint {
  std::size_t at = 0;
  double ratio = 1;  // geometric mean after / before
  double p_value = 1;
};
std::vector<ChangePoint> change_points(const std::vector<double>& series, double threshold, double alpha);

// Many variances, each estimated from a few values (one point's 3 rounds a
// side), share a machine's noise: empirical Bayes pools them (Smyth 2004, the
// moderated t of limma's fitFDist, no covariates). Each row's s^2 with d degrees
// of freedom is read as a draw of var * chi2(d) / d with var itself drawn from a
// scaled inverse chi2 of `df` degrees of freedom around `var`; the moments of
// log s^2 give both. A row's moderated variance is (df var + d s^2) / (df + d),
// tested with df + d degrees of freedom. df is 0 with fewer than 3 positive
// variances (nothing to learn from) and infinite when the rows vary no more
// than chi2 sampling explains (then every row takes `var`). Heavy tails (a
// round in a slow spell) widen the spread of log s^2, so df falls and each row
// keeps more of its own variance: the prior never hides a row's outlier.
struct VariancePrior {
  double df = 0;
  double var = 0;
};
VariancePrior variance_prior(const std::vector<double>& variances, const std::vector<double>& dfs);
double digamma(double x);
double trigamma(double x);

// Benjamini-Hochberg adjusted p-values (q-values), same order as p.
std::vector<double> benjamini_hochberg(const std::vector<double>& p);

}  // namespace runner::history
