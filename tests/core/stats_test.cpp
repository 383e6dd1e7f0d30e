#include <gtest/gtest.h>

#include "runner/context.hpp"
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

TEST(Record, SecondMetricOfTheSameNameThrowsInsteadOfOverwriting) {
  Record r;
  r.add("step_ms", 1.0, "ms");
  EXPECT_THROW(r.add("step_ms", Stats::of({1.0}), "ms"), std::invalid_argument);
  EXPECT_THROW(r.add_text("step_ms", "x"), std::invalid_argument);
  EXPECT_EQ(r.metrics.size(), 1u);
}

TEST(Context, CreateWithoutPluginFactoryThrowsANamedError) {
  Context ctx;
  Params params;
  params.set_plugin_name("transformer_lm");
  try {
    ctx.create<PluginBase>(PluginKind::Model, params);
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no plugin factory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace runner
