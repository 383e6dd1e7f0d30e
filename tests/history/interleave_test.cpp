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
  const Comparison quiet = compare(a, b, {});
  EXPECT_FALSE(quiet.regression());
  EXPECT_EQ(row(quiet, "step_ms").test, "t over rounds");
  const Side slow = merge_rounds({round(1.0, 1.5), round(1.08, 1.5), round(1.0, 1.5)}, "B");
  const Comparison changed = compare(a, slow, {});
  EXPECT_EQ(row(changed, "step_ms", 1).verdict, "slower");
  EXPECT_EQ(row(changed, "step_ms", 0).verdict, "same");
  EXPECT_EQ(row(changed, "step_ms", 1).note, "3 rounds: weak test (5 or more detect small changes)");
  // A test over rounds is not Welch's t from summaries: no "(t)" mark.
  std::ostringstream table;
  render_table(changed, table, false);
  EXPECT_EQ(table.str().find(" (t)"), std::string::npos) << table.str();
}

// One round of `points` points whose steps sit around `ms[point]`.
Side round_of(const std::vector<std::vector<double>>& steps) {
  std::vector<nlohmann::json> records;
  for (size_t p = 0; p < steps.size(); ++p) records.push_back(record(static_cast<int>(p), static_cast<int>(p) + 1, steps[p]));
  return side(records);
}

// Eight points, three rounds a side, each round 5 % off its neighbours: one
// point's rounds alone cannot tell 10 % from that spread (Welch's t over 3 + 3),
// but every point shows the same spread, so the pooled variance can.
TEST(Interleave, PointsPoolTheirRoundsSpreadSoThreeRoundsSeeTenPercent) {
  const std::vector<double> spread = {1.0, 1.05, 0.95};
  auto rounds = [&](double factor, int points) {
    std::vector<Side> out;
    for (double s : spread) out.push_back(round_of(std::vector<std::vector<double>>(points, around(factor * s))));
    return out;
  };
  const Comparison alone = compare(merge_rounds(rounds(1.0, 1), "A"), merge_rounds(rounds(1.1, 1), "B"), {});
  EXPECT_EQ(row(alone, "step_ms").test, "t over rounds");
  EXPECT_EQ(row(alone, "step_ms").verdict, "noisy");
  const Comparison pooled = compare(merge_rounds(rounds(1.0, 8), "A"), merge_rounds(rounds(1.1, 8), "B"), {});
  for (size_t p = 0; p < 8; ++p) {
    EXPECT_EQ(row(pooled, "step_ms", p).test, "moderated t over rounds");
    EXPECT_EQ(row(pooled, "step_ms", p).verdict, "slower") << p;
  }
  const Comparison same = compare(merge_rounds(rounds(1.0, 8), "A"), merge_rounds(rounds(1.0, 8), "B"), {});
  EXPECT_FALSE(same.regression());
}

// A slow spell of the machine that takes more than half of one round's steps
// triples that round's median, not its fastest step: rounds are tested on
// their fastest steps, so the spell neither hides a 4x slowdown nor, in two
// rounds of an A/A pair, reads as one.
TEST(Interleave, ASpellInHalfARoundsStepsMovesItsMedianNotItsFastestStep) {
  const int points = 6;
  auto spelled = [](double ms) {
    std::vector<double> steps = around(ms);
    for (size_t i = 0; i < 7; ++i) steps[i] *= 3;
    return steps;
  };
  auto round_at = [&](double ms, bool spell) {
    std::vector<std::vector<double>> steps(points, around(ms));
    if (spell) steps[0] = spelled(ms);
    return round_of(steps);
  };
  const Side a = merge_rounds({round_at(1.0, false), round_at(1.0, false), round_at(1.0, true)}, "A");
  EXPECT_NEAR(a.records[0].metrics.at("step_ms").max, 3.0, 0.1);  // the spelled round's median
  const Side four_times = merge_rounds({round_at(4.0, false), round_at(4.0, false), round_at(4.0, false)}, "B");
  const Comparison slower = compare(a, four_times, {});
  EXPECT_EQ(row(slower, "step_ms", 0).verdict, "slower");
  EXPECT_NEAR(row(slower, "step_ms", 0).ratio, 4.0, 0.1);
  const Side quiet = merge_rounds({round_at(1.0, false), round_at(1.0, false), round_at(1.0, false)}, "A");
  const Side spells = merge_rounds({round_at(1.0, true), round_at(1.0, false), round_at(1.0, true)}, "B");
  const Comparison aa = compare(quiet, spells, {});
  EXPECT_GT(row(aa, "step_ms", 0).ratio, 2.5);  // the medians say 3x ...
  EXPECT_EQ(row(aa, "step_ms", 0).verdict, "noisy");  // ... the fastest steps, nothing
  EXPECT_FALSE(aa.regression());
}

}  // namespace
}  // namespace runner::history
