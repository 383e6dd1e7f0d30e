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

}  // namespace runner::history
