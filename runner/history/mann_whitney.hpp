// Two-sided Mann-Whitney U test of two independent samples (e.g. the per-step
// times of one point in two runs). Follows scipy.stats.mannwhitneyu with
// method="auto": the exact null distribution when one side has at most 8 values
// and there are no ties, else the normal approximation with tie and continuity
// corrections. tests/history checks the values against SciPy on fixed samples.
#pragma once
#include <vector>

namespace runner::history {

struct UTest {
  double u = 0;        // U of the first sample (scipy's `statistic`)
  double p_value = 1;  // two-sided
  bool exact = false;  // exact distribution (else normal approximation)
};

// Both samples need at least one value; otherwise p_value is 1.
UTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

// Two-sided p of Welch's t-test from summary statistics alone (records that kept
// no samples): t = (mean_b - mean_a) / sqrt(sa^2/na + sb^2/nb) against Student's t
// with the Welch-Satterthwaite degrees of freedom. With a few steps per point this
// is far less confident than a normal tail. Needs n >= 2 on both sides.
double welch_t_p(double mean_a, double std_a, double n_a, double mean_b, double std_b, double n_b);
// Two-sided tail of Student's t: P(|T| >= |t|) with `df` degrees of freedom.
double student_t_two_sided(double t, double df);

}  // namespace runner::history
