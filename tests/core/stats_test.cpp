#include <gtest/gtest.h>

#include "runner/record.hpp"

namespace runner {
namespace {

TEST(Stats, OfOddSampleGivesMiddleMedianAndSampleStd) {
  const Stats s = Stats::of({3.0, 1.0, 2.0});
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.std, 1.0);  // n-1 in the denominator
}

TEST(Stats, EvenSampleMedianAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(Stats::of({4.0, 1.0, 3.0, 2.0}).median, 2.5);
}

TEST(Stats, SingleSampleHasZeroStd) {
  const Stats s = Stats::of({7.5});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.std, 0.0);
  EXPECT_DOUBLE_EQ(s.median, 7.5);
}

TEST(Stats, EmptySampleIsAllZero) {
  const Stats s = Stats::of({});
  EXPECT_EQ(s.n, 0);
  EXPECT_DOUBLE_EQ(s.mean, 0.0);
}

}  // namespace
}  // namespace runner
