// Properties of the U test that hold for any data (the values themselves are
// checked against SciPy by utest_vs_scipy.py).
#include <gtest/gtest.h>

#include "history/mann_whitney.hpp"

namespace runner::history {
namespace {

TEST(MannWhitney, SeparatedSamplesOfTwelveAreSignificant) {
  std::vector<double> a, b;
  for (int i = 0; i < 12; ++i) {
    a.push_back(1.0 + i * 0.01);
    b.push_back(2.0 + i * 0.01);
  }
  const UTest r = mann_whitney_u(a, b);
  EXPECT_EQ(r.u, 0);
  EXPECT_LT(r.p_value, 1e-4);
}

TEST(MannWhitney, IsSymmetricInItsSides) {
  const std::vector<double> a = {1.2, 3.4, 2.2, 5.1, 0.3}, b = {2.5, 4.4, 6.1, 3.3, 7.2, 1.1};
  const UTest ab = mann_whitney_u(a, b), ba = mann_whitney_u(b, a);
  EXPECT_DOUBLE_EQ(ab.p_value, ba.p_value);
  EXPECT_DOUBLE_EQ(ab.u + ba.u, 30.0);  // U1 + U2 = n1 * n2
}

TEST(MannWhitney, TwoValuesPerSideCanNeverBeSignificant) {
  // The smallest two-sided exact p for 2 vs 2 is 2 / C(4, 2) = 1/3.
  const UTest r = mann_whitney_u({1, 2}, {100, 200});
  EXPECT_TRUE(r.exact);
  EXPECT_NEAR(r.p_value, 1.0 / 3.0, 1e-12);
}

TEST(MannWhitney, EmptySideGivesNoEvidence) { EXPECT_EQ(mann_whitney_u({}, {1, 2, 3}).p_value, 1.0); }

}  // namespace
}  // namespace runner::history
