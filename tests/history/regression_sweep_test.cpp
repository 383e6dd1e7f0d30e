// Regression sweeps a team can trust (issue 45): points match on their
// identity (a filter run or other overrides never stand in as the baseline,
// two experiments are "nothing comparable"), verdicts keep their error rates
// (one gating metric per point, Benjamini-Hochberg over points, a test that
// holds under autocorrelation, a 4x change over 3 repetitions is slower), and
// every compare leaves its verdict in the history.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "history/cli.hpp"
#include "history/compare.hpp"
#include "history/verdict_stats.hpp"
#include "compare_support.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::env_json;
using testing::fresh_dir;
using testing::record;
using testing::row;
using testing::side;
using testing::stored;

// A record whose step_ms kept only the means of its repetitions (as the runner
// writes with measure.repetitions > 1): no per-step samples.
nlohmann::json repeated(int point, int size, const std::vector<double>& means) {
  nlohmann::json j = record(point, size, means);
  auto& m = j["metrics"]["step_ms"];
  m.erase("samples");
  m["repetition_means"] = means;
  m["n"] = 10 * means.size();
  return j;
}

// The run: 127.7 ms -> 522.6 ms over 3 repetitions came out `noisy`
// (the U test's smallest p over 3 + 3 values is 0.1).
TEST(RegressionVerdicts, FourTimesSlowerOverThreeRepetitionsIsSlowerNotNoisy) {
  const Comparison c = compare(side({repeated(0, 1, {127.1, 127.7, 128.4})}),
                               side({repeated(0, 1, {519.8, 522.6, 524.9})}), {});
  const CompareRow& r = row(c, "step_ms");
  EXPECT_EQ(r.verdict, "slower") << r.test << " p " << r.p_value;
  EXPECT_TRUE(r.separated);
  EXPECT_TRUE(c.regression());
}

TEST(RegressionVerdicts, ATestThatCannotDecideSaysWhy) {
  const Comparison few = compare(side({repeated(0, 1, {1.0, 1.2})}), side({repeated(0, 1, {1.15, 1.3})}), {});
  const CompareRow& r = row(few, "step_ms");
  EXPECT_EQ(r.verdict, "noisy");
  EXPECT_NE(r.note.find("2 repetitions: weak test"), std::string::npos) << r.note;
  std::ostringstream table;
  render_table(few, table, false);
  EXPECT_NE(table.str().find("2 repetitions: weak test"), std::string::npos) << table.str();
  // One step a side: no test at all, and the row says so rather than "noisy" alone.
  nlohmann::json a = record(0, 1, {1.0, 1.0}), b = record(0, 1, {2.0, 2.0});
  for (auto* j : {&a, &b}) {
    (*j)["metrics"]["step_ms"].erase("samples");
    (*j)["metrics"]["step_ms"]["n"] = 1;
  }
  a["metrics"]["step_ms"]["n"] = 2;
  const Comparison single = compare(side({a}), side({b}), {});
  const CompareRow& one = row(single, "step_ms");
  EXPECT_EQ(one.verdict, "noisy");
  EXPECT_EQ(one.note, "1 step: cannot detect (a test needs 2 a side)");
  // Three steps a side: the U test's smallest p is 0.1.
  const Comparison three = compare(side({record(0, 1, {1.0, 1.1, 1.3})}), side({record(0, 1, {1.2, 1.4, 1.5})}), {});
  EXPECT_EQ(row(three, "step_ms").note, "3 steps: cannot detect (smallest possible p 0.100)");
}

// tokens/s is 1 / step time: testing it again doubled the chances of a false
// alarm (the tokens_per_s "slower" while step_ms was noisy).
TEST(RegressionVerdicts, RatesDerivedFromTheStepTimeAreNotTestedAgain) {
  nlohmann::json a = record(0, 1, around(1.0)), b = record(0, 1, around(1.0));
  a["metrics"]["tokens_per_s"] = {{"unit", "tokens/s"}, {"n", 12}, {"median", 1000.0}, {"mean", 1000.0},
                                  {"std", 1.0}, {"min", 999.0}, {"max", 1001.0}, {"samples", around(1000.0)}};
  b["metrics"]["tokens_per_s"] = a["metrics"]["tokens_per_s"];
  b["metrics"]["tokens_per_s"]["samples"] = around(900.0, 12, 0.001);
  b["metrics"]["tokens_per_s"]["median"] = 900.0;
  const Comparison c = compare(side({a}), side({b}), {});
  const CompareRow& rate = row(c, "tokens_per_s");
  EXPECT_EQ(rate.verdict, "derived");
  EXPECT_EQ(rate.p_value, -1);
  EXPECT_FALSE(rate.regression);
  EXPECT_TRUE(row(c, "step_ms").gating);
  EXPECT_FALSE(c.regression());
}

// A phase time that is not the point's step time informs but does not gate.
TEST(RegressionVerdicts, OnlyThePrimaryMetricOfAPointGates) {
  nlohmann::json a = record(0, 1, around(10.0)), b = record(0, 1, around(10.0));
  a["metrics"]["forward_ms"] = a["metrics"]["step_ms"];
  b["metrics"]["forward_ms"] = record(0, 1, around(2.0))["metrics"]["step_ms"];
  a["metrics"]["forward_ms"] = record(0, 1, around(1.0))["metrics"]["step_ms"];
  const Comparison c = compare(side({a}), side({b}), {});
  EXPECT_EQ(row(c, "forward_ms").verdict, "slower");
  EXPECT_FALSE(row(c, "forward_ms").gating);
  EXPECT_FALSE(c.regression());
  CompareOptions named;
  named.metrics = {"forward_ms"};
  EXPECT_TRUE(compare(side({a}), side({b}), named).regression());
}

// 20 points, one with p 0.02 alone: over 20 tests that is what chance gives,
// so Benjamini-Hochberg keeps it noisy; each point at alpha 0.05 flagged it.
TEST(RegressionVerdicts, ManyPointsAreControlledByBenjaminiHochberg) {
  std::vector<nlohmann::json> a, b;
  for (int i = 0; i < 20; ++i) {
    a.push_back(repeated(i, i + 1, {1.0, 1.1, 0.95, 1.05, 1.0}));
    b.push_back(repeated(i, i + 1, i == 7 ? std::vector<double>{1.12, 1.2, 1.05, 1.15, 1.1}
                                          : std::vector<double>{1.0, 1.1, 0.95, 1.05, 1.0}));
  }
  const Comparison c = compare(side(a), side(b), {});
  const CompareRow& r = row(c, "step_ms", 7);
  EXPECT_NEAR(r.p_value, 0.019667063015606896, 1e-6);  // scipy ttest_ind(log a, log b, equal_var=False)
  EXPECT_NEAR(r.q_value, std::min(1.0, r.p_value * 20), 1e-9);
  EXPECT_EQ(r.verdict, "noisy");
  EXPECT_FALSE(c.regression());
  // The same point alone is slower.
  EXPECT_EQ(row(compare(side({a[7]}), side({b[7]}), {}), "step_ms").verdict, "slower");
}

TEST(RegressionVerdicts, BenjaminiHochbergMatchesStatsmodels) {
  // statsmodels.stats.multitest.multipletests([...], method="fdr_bh")[1]
  const auto q = benjamini_hochberg({0.01, 0.04, 0.03, 0.5, 0.002});
  const std::vector<double> want = {0.025, 0.05, 0.05, 0.5, 0.01};
  ASSERT_EQ(q.size(), want.size());
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], want[i], 1e-12) << i;
}

// AR(1) steps (each step remembers 80 % of the last one's deviation): a test
// that treats steps as independent flags a large share of identical pairs; the
// block bootstrap stays near its nominal rate.
TEST(RegressionVerdicts, DigammaAndTrigammaMatchTheirKnownValues) {
  EXPECT_NEAR(digamma(1), -0.5772156649015329, 1e-10);
  EXPECT_NEAR(digamma(0.5), -1.9635100260214235, 1e-10);
  EXPECT_NEAR(digamma(10), 2.251752589066721, 1e-10);
  EXPECT_NEAR(trigamma(1), M_PI * M_PI / 6, 1e-10);
  EXPECT_NEAR(trigamma(0.5), M_PI * M_PI / 2, 1e-10);
  EXPECT_NEAR(trigamma(10), 0.10516633568168575, 1e-10);
}

// Variances drawn as the prior says (a scaled inverse chi2 of 8 df around
// 0.01, each seen through chi2 of 4 df): the fit finds both again.
TEST(RegressionVerdicts, TheVariancePriorRecoversTheSpreadItWasDrawnFrom) {
  std::mt19937_64 rng(7);
  std::chi_squared_distribution<double> prior(8), own(4);
  std::vector<double> var, df;
  for (int i = 0; i < 4000; ++i) {
    const double sigma2 = 0.01 * 8 / prior(rng);
    var.push_back(sigma2 * own(rng) / 4);
    df.push_back(4);
  }
  const VariancePrior p = variance_prior(var, df);
  EXPECT_NEAR(p.df, 8, 2);
  EXPECT_NEAR(p.var, 0.01, 0.001);
  // Rows no more different than chi2 sampling makes them: one shared variance.
  EXPECT_TRUE(std::isinf(variance_prior({0.01, 0.01, 0.01, 0.01}, {4, 4, 4, 4}).df));
  // Fewer than 3 rows with a positive variance: nothing to learn from.
  EXPECT_EQ(variance_prior({0.01, 0.02, 0}, {4, 4, 4}).df, 0);
}

TEST(RegressionVerdicts, AutocorrelatedStepsDoNotRaiseFalseAlarms) {
  std::uint64_t state = 42;
  auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((state >> 11) + 0.5) / 9007199254740992.0;
  };
  auto normal = [&] { return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); };
  auto series = [&] {
    std::vector<double> x;
    double e = 0;
    for (int i = 0; i < 60; ++i) {
      e = 0.8 * e + 0.6 * normal();
      x.push_back(10.0 * (1 + 0.01 * e));
    }
    return x;
  };
  CompareOptions o;
  o.threshold = 0;  // every difference counts: the test alone decides
  int flagged = 0;
  const int pairs = 200;
  for (int i = 0; i < pairs; ++i) {
    MetricValue a, b;
    a.samples = series();
    b.samples = series();
    for (auto* m : {&a, &b}) {
      m->n = static_cast<std::int64_t>(m->samples.size());
      std::vector<double> s = m->samples;
      std::sort(s.begin(), s.end());
      m->center = (s[29] + s[30]) / 2;
      m->min = s.front();
      m->max = s.back();
      m->unit = "ms";
    }
    const CompareRow r = compare_metric(a, b, o);
    EXPECT_EQ(r.test, "block bootstrap");
    flagged += r.p_value < 0.05;
  }
  EXPECT_LE(flagged, pairs * 15 / 100) << flagged << " of " << pairs << " identical pairs flagged at alpha 0.05";
}

TEST(RegressionIdentity, TwoExperimentsAreNothingComparable) {
  nlohmann::json other = record(0, 1, around(1.0));
  other["experiment"] = "other";
  EXPECT_THROW(compare(side({record(0, 1, around(1.0))}), side({other}), {}), NothingComparable);
  // One common point is enough.
  EXPECT_NO_THROW(compare(side({record(0, 1, around(1.0))}), side({record(0, 1, around(1.0)), other}), {}));
}

TEST(RegressionIdentity, TheDriverIsPartOfTheIdentityAndMeasureSettingsAreNot) {
  nlohmann::json a = record(0, 1, around(1.0)), b = record(0, 1, around(1.0));
  a["env"]["driver"] = "580.1";
  b["env"]["driver"] = "590.2";
  EXPECT_THROW(compare(side({a}), side({b}), {}), NothingComparable);
  b["env"]["driver"] = "580.1";
  b["params"]["measure.measured_steps"] = 99;
  EXPECT_EQ(point_identity(parse_record(a)), point_identity(parse_record(b)));
  b["params"]["size"] = 2;
  EXPECT_NE(point_identity(parse_record(a)), point_identity(parse_record(b)));
}

TEST(RegressionIdentity, ARebuiltPluginIsNamedInTheCompare) {
  nlohmann::json a = record(0, 1, around(1.0)), b = record(0, 1, around(2.7));
  a["task"] = b["task"] = "echo";
  a["env"]["plugins"] = {{"task/echo", {{"sha256", std::string(64, 'a')}, {"file", "/x/libecho.so"}}}};
  b["env"]["plugins"] = {{"task/echo", {{"sha256", std::string(64, 'b')}, {"file", "/x/libecho.so"}}}};
  const Comparison c = compare(side({a}), side({b}), {});
  ASSERT_EQ(c.build_changes.size(), 1u);
  EXPECT_EQ(c.build_changes[0], "task/echo: sha256 aaaaaaaa -> bbbbbbbb (commit none -> none)");
  EXPECT_NE(build_identity(parse_record(a)), build_identity(parse_record(b)));
  std::ostringstream table;
  render_table(c, table, false);
  EXPECT_NE(table.str().find("code changed: task/echo"), std::string::npos) << table.str();
}

TEST(RegressionIdentity, AnUnknownIgnoredParameterIsAnErrorNotANoOp) {
  CompareOptions o;
  o.ignore_params = {"d_model"};
  try {
    compare(side({record(0, 1, around(1.0))}), side({record(0, 2, around(1.0))}), o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--ignore-param d_model: no point on either side has that parameter (they "
                                         "have: size)"), std::string::npos) << e.what();
  }
  o.ignore_params = {"size"};
  const Comparison c = compare(side({record(0, 1, around(1.0))}), side({record(0, 2, around(1.0))}), o);
  EXPECT_EQ(c.rows.size(), 2u);
}

// History runs with two points of size 1 and 2 (or what `sizes` says).
std::int64_t add_run(HistoryStore& store, const std::string& started, const std::vector<int>& sizes, double ms,
                     const nlohmann::json& overrides = nlohmann::json::array(), const std::string& dir = "") {
  nlohmann::json env = env_json();
  env["overrides"] = overrides;
  const auto id = store.begin_run("demo", dir, env, false, started);
  for (size_t i = 0; i < sizes.size(); ++i) {
    nlohmann::json r = record(static_cast<int>(i), sizes[i], around(ms));
    r["env"] = env;
    store.add_point(id, stored({r}));
  }
  store.finish_run(id, started);
  return id;
}

// The nightly: a --filter run (one point) and a run with other
// overrides were newer than the last full run, and became the baseline.
TEST(RegressionIdentity, LastGoodIsChosenPerPointSoFilterAndOverrideRunsDoNotStandIn) {
  const auto dir = fresh_dir("identity-last-good");
  HistoryStore store(dir / "h.sqlite");
  const auto full = add_run(store, "2026-11-01T00:00:00Z", {1, 2}, 1.0);
  const auto filtered = add_run(store, "2026-11-02T00:00:00Z", {1}, 1.0);
  add_run(store, "2026-11-03T00:00:00Z", {64, 128}, 1.0, {"size=64"});
  const auto tonight = add_run(store, "2026-11-04T00:00:00Z", {1, 2}, 1.0);
  const Side b = resolve_side("run:" + std::to_string(tonight), &store, nullptr, "");
  for (const std::string spec : {"last", "last-good"}) {
    const Side a = resolve_side(spec, &store, &b, "");
    ASSERT_EQ(a.runs.size(), 2u) << spec;
    EXPECT_EQ(a.runs[0].id, filtered) << spec;  // size=1: the newest run that has it
    EXPECT_EQ(a.runs[1].id, full) << spec;      // size=2: only the full run has it
    const Comparison c = compare(a, b, {});
    EXPECT_TRUE(c.only_in_a.empty() && c.only_in_b.empty()) << spec;
  }
  // A run whose points no earlier run has: nothing comparable, not a pass.
  const auto novel = add_run(store, "2026-11-05T00:00:00Z", {7}, 1.0);
  const Side lone = resolve_side("run:" + std::to_string(novel), &store, nullptr, "");
  EXPECT_THROW(resolve_side("last-good", &store, &lone, ""), NothingComparable);
}

// Conbench's lookback: a point that moves 12 % between runs on this machine
// (the history says so) is not a regression when it moves 12 % again; twice
// as slow still is.
TEST(RegressionVerdicts, AChangeWithinThePointsOwnHistoryIsNoisy) {
  const auto dir = fresh_dir("lookback");
  HistoryStore store(dir / "h.sqlite");
  std::int64_t last = 0;
  for (int i = 0; i < 8; ++i)
    last = add_run(store, "2026-11-0" + std::to_string(i + 1) + "T00:00:00Z", {1}, i % 2 ? 1.12 : 1.0);
  const auto usual = add_run(store, "2026-11-10T00:00:00Z", {1}, 1.13);
  const auto slow = add_run(store, "2026-11-11T00:00:00Z", {1}, 2.0);
  for (const auto& [id, verdict] : {std::pair{usual, "noisy"}, std::pair{slow, "slower"}}) {
    const Side a = resolve_side("run:" + std::to_string(last - 1), &store, nullptr, "");  // a 1.0 run
    const Side b = resolve_side("run:" + std::to_string(id), &store, nullptr, "");
    EXPECT_EQ(row(compare(a, b, {}), "step_ms").verdict, "slower");  // one run's steps alone
    CompareOptions o;
    add_lookback(o, store, b);
    const Comparison c = compare(a, b, o);
    EXPECT_EQ(row(c, "step_ms").verdict, verdict) << row(c, "step_ms").note;
    if (std::string(verdict) == "noisy")
      EXPECT_NE(row(c, "step_ms").note.find("within this point's history: z "), std::string::npos)
          << row(c, "step_ms").note;
  }
}

struct Captured {
  int code;
  std::string out, err;
};

Captured run_compare(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = compare_command(args);
  return {code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
}

// A manual compare flagged a 5.5x slower run, recorded nothing, and that run
// became the next last-good.
TEST(RegressionIdentity, EveryCompareRecordsItsVerdictAndARegressedRunIsNeverLastGood) {
  const auto dir = fresh_dir("identity-verdicts");
  const std::string db = (dir / "h.sqlite").string();
  std::int64_t base, slow, next;
  {
    HistoryStore store(db);
    base = add_run(store, "2026-11-01T00:00:00Z", {1, 2}, 1.0);
    slow = add_run(store, "2026-11-02T00:00:00Z", {1, 2}, 5.5);
    next = add_run(store, "2026-11-03T00:00:00Z", {1, 2}, 1.0);
  }
  const Captured c = run_compare({"run:" + std::to_string(base), "run:" + std::to_string(slow), "--history", db});
  EXPECT_EQ(c.code, 1) << c.out << c.err;
  HistoryStore store(db);
  EXPECT_EQ(store.run(slow)->verdict, "regression");
  ASSERT_EQ(store.compares(slow).size(), 1u);
  EXPECT_EQ(store.compares(slow)[0].verdict, "regression");
  const Side b = resolve_side("run:" + std::to_string(next), &store, nullptr, "");
  const Side a = resolve_side("last-good", &store, &b, "");
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].id, base);
  // A later lenient compare does not clear the regression.
  EXPECT_EQ(run_compare({"run:" + std::to_string(slow), "run:" + std::to_string(slow), "--history", db}).code, 0);
  EXPECT_EQ(store.run(slow)->verdict, "regression");
}

TEST(RegressionIdentity, CompareOfTwoExperimentsExitsTwoNothingComparable) {
  const auto dir = fresh_dir("identity-two-experiments");
  const std::string db = (dir / "h.sqlite").string();
  std::int64_t one, two;
  {
    HistoryStore store(db);
    one = add_run(store, "2026-11-01T00:00:00Z", {1}, 1.0);
    nlohmann::json r = record(0, 1, around(1.0));
    r["experiment"] = "other";
    two = store.begin_run("other", {}, env_json(), false, "2026-11-02T00:00:00Z");
    store.add_point(two, stored({r}));
    store.finish_run(two);
  }
  const Captured c = run_compare({"run:" + std::to_string(one), "run:" + std::to_string(two), "--history", db});
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.err.find("nothing comparable: no point of B (1 records) has the identity of a point of A (1): A is "
                       "experiment demo, B is other"), std::string::npos) << c.err;
}

TEST(RegressionIdentity, IgnoreParamTakesACommaList) {
  const auto dir = fresh_dir("identity-ignore");
  const std::string db = (dir / "h.sqlite").string();
  std::int64_t one, two;
  {
    HistoryStore store(db);
    one = add_run(store, "2026-11-01T00:00:00Z", {1}, 1.0);
    two = add_run(store, "2026-11-02T00:00:00Z", {2}, 1.0);
  }
  const std::vector<std::string> sides = {"run:" + std::to_string(one), "run:" + std::to_string(two), "--history", db};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = sides;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_compare(args);
  };
  EXPECT_EQ(with({}).code, 2);  // size differs: nothing comparable
  const Captured listed = with({"--ignore-param", "size,measure.measured_steps"});
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("step_ms"), std::string::npos) << listed.out;
  const Captured typo = with({"--ignore-param", "size,sise"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("--ignore-param sise: no point on either side has that parameter"), std::string::npos)
      << typo.err;
}

TEST(RegressionIdentity, HistoryShowsEachRunsOverrides) {
  const auto dir = fresh_dir("identity-overrides");
  const std::string db = (dir / "h.sqlite").string();
  {
    HistoryStore store(db);
    add_run(store, "2026-11-01T00:00:00Z", {1}, 1.0, {"model.d_model=64", "measure.repetitions=5"});
    EXPECT_EQ(store.runs({}).front().overrides,
              (std::vector<std::string>{"model.d_model=64", "measure.repetitions=5"}));
  }
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(history_command({"--history", db}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("--set model.d_model=64 --set measure.repetitions=5"), std::string::npos) << out;
}

}  // namespace
}  // namespace runner::history
