// Interleaved A/B (runner ab): the order of the rounds, how rounds merge into
// one side, and that a compare over rounds holds a drift that hits both sides
// alike (false alarm of a back-to-back compare) apart from a real change.
#include <gtest/gtest.h>

#include <sstream>

#include "history/interleave.hpp"
#include "compare_support.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::record;
using testing::row;
using testing::side;

// One round: two points whose steps sit around `ms` (times `slow` for point 1).
Side round(double ms, double slow = 1.0, const std::string& status = "ok") {
  return side({record(0, 1, around(ms)), record(1, 2, around(ms * slow), 1e6, status)});
}

TEST(Interleave, RoundsAlternateInMirroredPairs) {
  EXPECT_EQ(interleaved_order(3), "ABBAAB");
  EXPECT_EQ(interleaved_order(4), "ABBAABBA");
}

TEST(Interleave, RoundsMergeIntoTheirMediansAsRepetitions) {
  const Side s = merge_rounds({round(1.0), round(1.2), round(1.1)}, "A");
  ASSERT_EQ(s.records.size(), 2u);
  const MetricValue& m = s.records[0].metrics.at("step_ms");
  EXPECT_EQ(m.samples.size(), 3u);
  EXPECT_NEAR(m.center, 1.1, 1e-3);  // the middle round's median
  EXPECT_NEAR(m.min, 1.0, 1e-3);
  EXPECT_NEAR(m.max, 1.2, 1e-3);
  EXPECT_EQ(m.n, 36);  // steps: the samples are read as batch means, not steps
  EXPECT_TRUE(s.records[0].metrics.at("peak_bytes").samples.empty());
  EXPECT_EQ(s.runs.size(), 1u);
}

TEST(Interleave, APointFailedInAnyRoundIsFailed) {
  const Side a = merge_rounds({round(1.0), round(1.0), round(1.0)}, "A");
  const Side b = merge_rounds({round(1.0), round(1.0, 1.0, "error"), round(1.0)}, "B");
  const Comparison c = compare(a, b, {});
  EXPECT_EQ(row(c, "status").verdict, "failed");
  EXPECT_TRUE(c.regression());
}

// A drift that makes a whole run 8 % slower: back to back (A before the
// drift, B in it) it is a regression; in interleaved rounds both sides get
// one drifted round, and the compare stays quiet.
TEST(Interleave, DriftThatHitsBothSidesIsNotARegressionButARealChangeIs) {
  const Comparison back_to_back = compare(round(1.0), round(1.08), {});
  EXPECT_TRUE(back_to_back.regression());
  const Side a = merge_rounds({round(1.0), round(1.08), round(1.0)}, "A");
  const Side b = merge_rounds({round(1.0), round(1.08), round(1.01)}, "B");
  Comparison quiet = compare(a, b, {});
  name_rounds(quiet);
  EXPECT_FALSE(quiet.regression());
  EXPECT_EQ(row(quiet, "step_ms").test, "t over rounds");
  const Side slow = merge_rounds({round(1.0, 1.5), round(1.08, 1.5), round(1.0, 1.5)}, "B");
  Comparison changed = compare(a, slow, {});
  name_rounds(changed);
  EXPECT_EQ(row(changed, "step_ms", 1).verdict, "slower");
  EXPECT_EQ(row(changed, "step_ms", 0).verdict, "same");
  EXPECT_EQ(row(changed, "step_ms", 1).note, "3 rounds: weak test (5 or more detect small changes)");
  // A test over rounds is not Welch's t from summaries: no "(t)" mark.
  std::ostringstream table;
  render_table(changed, table, false);
  EXPECT_EQ(table.str().find(" (t)"), std::string::npos) << table.str();
}

}  // namespace
}  // namespace runner::history
