#include <gtest/gtest.h>

#include "config/sweep.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::test_registry;
using testing::write_file;

struct Loaded {
  std::filesystem::path file;
  std::vector<Point> points;
};

Loaded expand(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  Loaded l;
  l.file = write_file(fresh_dir("validate") / "e.yaml", yaml);
  l.points = expand_points(load_experiment(l.file, overrides, false), test_registry());
  return l;
}

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  std::filesystem::path file;
  try {
    file = write_file(fresh_dir("validate") / "e.yaml", yaml);
    expand_points(load_experiment(file, overrides, false), test_registry());
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    const auto pos = msg.find(file.string());
    if (pos != std::string::npos) msg.replace(pos, file.string().size(), "FILE");
    return msg;
  }
  return "(no error)";
}

TEST(Validate, DefaultsFillEveryDeclaredOption) {
  const auto l = expand("experiment: e\ntask: echo\n");
  ASSERT_EQ(l.points.size(), 1u);
  const Params& p = l.points[0].params;
  EXPECT_DOUBLE_EQ(p.number("value"), 1.0);
  EXPECT_EQ(p.text("fail"), "none");
  EXPECT_EQ(p.plugin("optimizer").plugin_name(), "sgd");
  EXPECT_DOUBLE_EQ(p.plugin("optimizer").number("lr"), 1e-3);
}

TEST(Validate, UnknownOptionSuggestsTheClosest) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams:\n  valeu: 3\n"),
            "FILE:4:3: params.valeu: unknown option; did you mean 'value'?");
}

TEST(Validate, WrongTypeNamesExpectedTypeAndValue) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams: {sleep_us: fast}\n"),
            "FILE:3:20: params.sleep_us: expected an int, got 'fast'");
}

TEST(Validate, EnumValueOutsideChoicesSuggests) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams: {fail: eror}\n"),
            "FILE:3:16: params.fail: 'eror' is not one of the choices; did you mean 'error'?");
}

TEST(Validate, UnknownTaskPluginSuggests) {
  EXPECT_EQ(error_of("experiment: e\ntask: ecko\n"),
            "FILE:2:7: task: no task plugin named 'ecko'; did you mean 'echo'? (see `runner plugins`)");
}

TEST(Validate, UnknownNestedPluginSuggests) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams: {optimizer: sgf}\n"),
            "FILE:3:21: params.optimizer: no optimizer plugin named 'sgf'; did you mean 'sgd'? (see `runner plugins`)");
}

TEST(Validate, NestedPluginOptionsAreChecked) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams:\n  optimizer: {name: sgd, lrr: 0.1}\n"),
            "FILE:4:26: params.optimizer.lrr: unknown option; did you mean 'lr'?");
}

TEST(Validate, ListOptionNeedsASequence) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams: {labels: x}\n"),
            "FILE:3:18: params.labels: expected a list<string> like [a, b], got x");
}

TEST(Validate, SetOverrideErrorsNameTheFlag) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\n", {"params.sleep_us=lots"}),
            "--set params.sleep_us=lots: params.sleep_us: expected an int, got 'lots'");
}

TEST(Validate, SweepAxisOnUnknownOptionPointsAtTheValue) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nsweep:\n  vlaue: [1, 2]\n"),
            "FILE:4:11: params.vlaue: unknown option; did you mean 'value'?");
}

TEST(Validate, MeasureSettingsAreValidated) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nmeasure: {warmup: 3}\n"),
            "FILE:3:11: measure.warmup: unknown option; did you mean 'warmup_steps'?");
}

TEST(Validate, AdaptiveStoppingSettingsAreChecked) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nmeasure: {target_rel_stderr: 0.01, min_steps: 20, max_steps: 5}\n"),
            "FILE:3:10: measure: adaptive stopping needs 2 <= min_steps <= max_steps and max_seconds > 0 "
            "(got min_steps 20, max_steps 5)");
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nmeasure: {target_rel_stderr: 5}\n"),
            "FILE:3:10: measure: target_rel_stderr is a fraction (0.01 = 1%); 0 turns adaptive stopping off");
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nmeasure: {cache: hot}\n"),
            "FILE:3:18: measure.cache: 'hot' is not one of the choices; valid: warm, cold");
}

TEST(Sweep, AdaptiveRepetitionsAndCacheReachThePoint) {
  const auto l = expand("experiment: e\ntask: echo\nmeasure: {target_rel_stderr: 0.02, min_steps: 4, max_steps: 9, "
                        "max_seconds: 3, repetitions: 2, cache: cold}\n");
  ASSERT_EQ(l.points.size(), 1u);
  const MeasureSettings& m = l.points[0].measure;
  EXPECT_TRUE(m.adaptive());
  EXPECT_DOUBLE_EQ(m.target_rel_stderr, 0.02);
  EXPECT_EQ(m.min_steps, 4);
  EXPECT_EQ(m.max_steps, 9);
  EXPECT_DOUBLE_EQ(m.max_seconds, 3);
  EXPECT_EQ(m.repetitions, 2);
  EXPECT_EQ(m.cache, "cold");
}

TEST(Validate, UnknownPrecisionIsRejected) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nprecision: fp8\n"),
            "FILE:3:12: precision: 'fp8' is not one of the choices; did you mean 'fp32'?");
}

TEST(Sweep, CartesianProductWithLastAxisFastest) {
  const auto l = expand("experiment: e\ntask: echo\nsweep:\n  value: [1, 2]\n  word: [x, y, z]\n");
  ASSERT_EQ(l.points.size(), 6u);
  EXPECT_DOUBLE_EQ(l.points[0].params.number("value"), 1);
  EXPECT_EQ(l.points[0].params.text("word"), "x");
  EXPECT_EQ(l.points[1].params.text("word"), "y");
  EXPECT_DOUBLE_EQ(l.points[3].params.number("value"), 2);
  EXPECT_EQ(l.points[5].index, 5);
  EXPECT_EQ(describe_point(l.points[4]), "value=2 word=y");
}

TEST(Sweep, ZipPairsAxesInsteadOfCrossingThem) {
  const auto l = expand("experiment: e\ntask: echo\nsweep:\n  zip: {value: [1, 2], word: [one, two]}\n  sleep_us: [0, 1]\n");
  ASSERT_EQ(l.points.size(), 4u);
  EXPECT_EQ(l.points[0].params.text("word"), "one");
  EXPECT_DOUBLE_EQ(l.points[2].params.number("value"), 2);
  EXPECT_EQ(l.points[2].params.text("word"), "two");
}

TEST(Sweep, ZipWithUnequalLengthsIsRejected) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nsweep:\n  zip: {value: [1, 2], word: [one]}\n"),
            "FILE:4:30: sweep.zip.word: has 1 values but the zip's first axis has 2; zipped axes pair up and need equal lengths");
}

TEST(Sweep, MeasurePrecisionAndNestedPluginAxes) {
  const auto l = expand("experiment: e\ntask: echo\nsweep:\n  measure.warmup_steps: [0, 3]\n"
                        "  precision: [fp32, bf16]\n  optimizer.lr: [0.5]\n");
  ASSERT_EQ(l.points.size(), 4u);
  EXPECT_EQ(l.points[0].measure.warmup_steps, 0);
  EXPECT_EQ(l.points[3].measure.warmup_steps, 3);
  EXPECT_EQ(l.points[1].precision.name, "bf16");
  EXPECT_TRUE(l.points[1].precision.autocast.has_value());
  EXPECT_DOUBLE_EQ(l.points[0].params.plugin("optimizer").number("lr"), 0.5);
}

TEST(Sweep, SetOverridesASweepAxis) {
  const auto l = expand("experiment: e\ntask: echo\nsweep:\n  value: [1, 2, 3]\n", {"sweep.value=[9]"});
  ASSERT_EQ(l.points.size(), 1u);
  EXPECT_DOUBLE_EQ(l.points[0].params.number("value"), 9);
}

TEST(Sweep, EmptyAxisIsRejected) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nsweep:\n  value: []\n"),
            "FILE:4:10: sweep.value: an axis needs a non-empty list of values, e.g. [a, b]");
}

}  // namespace
}  // namespace runner
