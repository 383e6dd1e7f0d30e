// Verdicts of compare on synthetic records: slower/faster only when the change
// is beyond the threshold and significant, noisy otherwise, memory by value,
// failed points and one-sided points listed, devices checked, and renderings.
#include <gtest/gtest.h>

#include <sstream>

#include "history/compare.hpp"
#include "history/mann_whitney.hpp"
#include "compare_support.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::env_json;
using testing::record;
using testing::row;
using testing::side;

TEST(Compare, TwiceTheStepTimeIsSlowerWithASmallPValueAndARegression) {
  const Comparison c = compare(side({record(0, 1, around(1.0))}), side({record(0, 1, around(2.0))}), {});
  const CompareRow& r = row(c, "step_ms");
  EXPECT_NEAR(r.ratio, 2.0, 1e-9);
  EXPECT_LT(r.p_value, 1e-3);
  EXPECT_EQ(r.test, "block bootstrap");
  EXPECT_EQ(r.verdict, "slower");
  EXPECT_TRUE(c.regression());
}

TEST(Compare, HalfTheStepTimeIsFasterAndNoRegression) {
  const Comparison c = compare(side({record(0, 1, around(2.0))}), side({record(0, 1, around(1.0))}), {});
  EXPECT_EQ(row(c, "step_ms").verdict, "faster");
  EXPECT_FALSE(c.regression());
}

TEST(Compare, SameSamplesAreSame) {
  const Comparison c = compare(side({record(0, 1, around(1.0))}), side({record(0, 1, around(1.0))}), {});
  EXPECT_EQ(row(c, "step_ms").verdict, "same");
  EXPECT_NEAR(row(c, "step_ms").p_value, 1.0, 1e-9);
  EXPECT_FALSE(c.regression());
}

TEST(Compare, ABigChangeOverTwoStepsIsNoisyNotARegression) {
  const Comparison c = compare(side({record(0, 1, {1.0, 1.1})}), side({record(0, 1, {1.5, 1.6})}), {});
  EXPECT_EQ(row(c, "step_ms").verdict, "noisy");
  EXPECT_FALSE(c.regression());
}

TEST(Compare, OverlappingWideSamplesAreNoisy) {
  const Comparison c =
      compare(side({record(0, 1, around(1.0, 12, 0.8))}), side({record(0, 1, around(1.1, 12, 0.8))}), {});
  EXPECT_EQ(row(c, "step_ms").verdict, "noisy");
}

TEST(Compare, ThresholdDecidesWhatCountsAsSame) {
  CompareOptions o;
  o.threshold = 0.5;
  const Comparison c = compare(side({record(0, 1, around(1.0))}), side({record(0, 1, around(1.3))}), o);
  EXPECT_EQ(row(c, "step_ms").verdict, "same");
}

TEST(Compare, MoreMemoryIsLargerWithoutATest) {
  const Comparison c =
      compare(side({record(0, 1, around(1.0), 1e6)}), side({record(0, 1, around(1.0), 1.5e6)}), {});
  const CompareRow& r = row(c, "peak_bytes");
  EXPECT_EQ(r.verdict, "larger");
  EXPECT_EQ(r.p_value, -1);
  EXPECT_TRUE(r.regression);
}

TEST(Compare, AFailedPointIsARegressionAndAFixedOneIsNot) {
  const Comparison broke = compare(side({record(0, 1, around(1.0))}), side({record(0, 1, {}, 0, "error")}), {});
  EXPECT_EQ(row(broke, "status").verdict, "failed");
  EXPECT_TRUE(broke.regression());
  const Comparison fixed = compare(side({record(0, 1, {}, 0, "oom")}), side({record(0, 1, around(1.0))}), {});
  EXPECT_EQ(row(fixed, "status").verdict, "fixed");
  EXPECT_FALSE(fixed.regression());
}

TEST(Compare, PointsOnOneSideOnlyAreListed) {
  const Comparison c = compare(side({record(0, 1, around(1.0)), record(1, 2, around(1.0))}),
                               side({record(0, 1, around(1.0)), record(1, 3, around(1.0))}), {});
  ASSERT_EQ(c.only_in_a.size(), 1u);
  ASSERT_EQ(c.only_in_b.size(), 1u);
  EXPECT_EQ(c.only_in_a[0], "main size=2");
  EXPECT_EQ(c.only_in_b[0], "main size=3");
  std::ostringstream md, table;
  render_markdown(c, md);
  render_table(c, table, false);
  EXPECT_NE(md.str().find("only in A: main size=2"), std::string::npos) << md.str();
  EXPECT_NE(table.str().find("only in B: main size=3"), std::string::npos) << table.str();
  const auto j = comparison_json(c);
  EXPECT_EQ(j["only_in_a"][0], "main size=2");
}

TEST(Compare, DifferentDevicesNeedTheFlagAndThenWarn) {
  EXPECT_THROW(compare(side({record(0, 1, around(1.0))}, "CPU A"), side({record(0, 1, around(1.0))}, "CPU B"), {}),
               std::invalid_argument);
  CompareOptions o;
  o.cross_device = true;
  const Comparison c = compare(side({record(0, 1, around(1.0))}, "CPU A"), side({record(0, 1, around(1.0))}, "CPU B"), o);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("CPU A"), std::string::npos);
}

TEST(Compare, MarkdownAndJsonCarryEveryRowAndTheVerdict) {
  const Comparison c = compare(side({record(0, 1, around(1.0)), record(1, 2, around(1.0))}),
                               side({record(0, 1, around(2.0)), record(1, 2, around(1.0))}), {});
  std::ostringstream md;
  render_markdown(c, md);
  EXPECT_NE(md.str().find("**regression**"), std::string::npos);
  EXPECT_NE(md.str().find("| main size=1 | step_ms | 0.9996 ms | 1.999 ms | 2.000 |"), std::string::npos) << md.str();
  const auto j = comparison_json(c);
  EXPECT_TRUE(j["regression"].get<bool>());
  EXPECT_EQ(j["rows"].size(), 4u);  // 2 points x (step_ms, peak_bytes)
  EXPECT_EQ(j["verdicts"]["slower"], 1);
}

// JSON is streamed, not built with nlohmann: text that needs escaping (a label
// with quotes, a backslash, a newline, a control character) and a ratio that is
// not finite must still come out as valid JSON with the same values.
TEST(Compare, JsonEscapesTextAndWritesNonFiniteRatiosAsNull) {
  nlohmann::json a = record(0, 1, around(1.0)), b = record(0, 1, around(2.0));
  for (auto* j : {&a, &b}) (*j)["labels"] = {{"name", "say \"hi\"\\path\nnext\x01"}};
  a["metrics"]["peak_bytes"]["value"] = 0.0;
  Comparison c = compare(side({a}), side({b}), {});
  c.warnings.push_back("tab\there");
  std::ostringstream text;
  write_json(c, text);
  const auto j = nlohmann::json::parse(text.str());
  ASSERT_EQ(j["rows"].size(), 2u) << text.str();
  EXPECT_EQ(j["rows"][0]["point"], "main name=say \"hi\"\\path\nnext\x01");
  EXPECT_EQ(j["warnings"][0], "tab\there");
  const auto& peak = j["rows"][0]["metric"] == "peak_bytes" ? j["rows"][0] : j["rows"][1];
  EXPECT_TRUE(peak["ratio"].is_null()) << peak.dump();  // 0 -> 1e6 bytes: B/A is infinite
  EXPECT_TRUE(peak["p_value"].is_null());
  EXPECT_EQ(j["verdicts"]["slower"], 1);
}

// Three steps a point and no samples: Welch's t with its few degrees of freedom,
// not a normal tail (which said p = 1e-22), and the table marks that p.
TEST(Compare, RecordsWithoutSamplesGetWelchsTMarkedInTheTable) {
  nlohmann::json a = record(0, 1, {1.0, 1.01, 0.99}), b = record(0, 1, {1.5, 1.52, 1.49});
  for (auto* j : {&a, &b}) (*j)["metrics"]["step_ms"].erase("samples");
  const Comparison c = compare(side({a}), side({b}), {});
  const CompareRow& r = row(c, "step_ms");
  EXPECT_EQ(r.test, "t (no samples)");
  // SciPy's ttest_ind(equal_var=False) on these samples; a normal tail gives 0 (z = 48).
  EXPECT_NEAR(r.p_value, 5.475931521930866e-06, 1e-12);
  std::ostringstream table;
  render_table(c, table, false);
  EXPECT_NE(table.str().find(" (t)  slower"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("p (t): Welch's t-test"), std::string::npos) << table.str();
}

// Reference values: scipy.stats.ttest_ind_from_stats(..., equal_var=False) and 2 * t.sf.
TEST(Compare, WelchTMatchesSciPy) {
  EXPECT_NEAR(welch_t_p(1.0, 0.01, 3, 1.05, 0.012, 3), 0.00568450279994426, 1e-10);
  EXPECT_NEAR(welch_t_p(10.0, 1.0, 20, 10.9, 2.0, 15), 0.12603445476581956, 1e-10);
  EXPECT_NEAR(student_t_two_sided(2.5, 3.7), 0.07182202291182678, 1e-10);
  EXPECT_NEAR(student_t_two_sided(-40, 2), 0.0006244146721847406, 1e-12);
  EXPECT_NEAR(student_t_two_sided(0, 5), 1.0, 1e-12);
}

// flop and bytes_moved (one value, equal on both sides) and a loss (no better
// direction) are left out of the table and Markdown, named in one line, kept in
// the JSON, and shown when --metric names them.
TEST(Compare, ConstantAndDirectionlessMetricsStayOutOfTheTable) {
  nlohmann::json a = record(0, 1, around(1.0)), b = record(0, 1, around(1.0));
  for (auto* j : {&a, &b}) {
    (*j)["metrics"]["flop"] = {{"unit", "FLOP"}, {"value", 2e9}};
    (*j)["metrics"]["bytes_moved"] = {{"unit", "bytes"}, {"value", 4e6}};
  }
  a["metrics"]["loss_last"] = {{"unit", ""}, {"value", 2.0}};
  b["metrics"]["loss_last"] = {{"unit", ""}, {"value", 2.5}};
  const Comparison c = compare(side({a}), side({b}), {});
  std::ostringstream table, md;
  render_table(c, table, false);
  render_markdown(c, md);
  for (const std::string text : {table.str(), md.str()}) {
    EXPECT_EQ(text.find("| flop"), std::string::npos) << text;
    EXPECT_EQ(text.find("higher"), std::string::npos) << text;
    EXPECT_NE(text.find("not shown: 2 constant (bytes_moved, peak_bytes), 2 without a better direction "
                        "(flop, loss_last); --metric NAME shows one"), std::string::npos) << text;
  }
  EXPECT_NE(table.str().find("step_ms"), std::string::npos);
  EXPECT_EQ(comparison_json(c)["rows"].size(), 5u);
  CompareOptions named;
  named.metrics = {"loss_last"};
  std::ostringstream only;
  render_table(compare(side({a}), side({b}), named), only, false);
  EXPECT_NE(only.str().find("loss_last"), std::string::npos) << only.str();
}

TEST(Compare, BetterDirectionComesFromTheUnit) {
  EXPECT_EQ(better_direction("ms"), -1);
  EXPECT_EQ(better_direction("bytes"), -1);
  EXPECT_EQ(better_direction("TFLOP/s"), +1);
  EXPECT_EQ(better_direction("GB/s"), +1);
  EXPECT_EQ(better_direction("units"), 0);
}

}  // namespace
}  // namespace runner::history
