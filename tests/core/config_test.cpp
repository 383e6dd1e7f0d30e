#include <gtest/gtest.h>

#include "config/config_overrides.hpp"
#include "config/experiment.hpp"
#include "error_of.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::error_of;
using testing::fresh_dir;
using testing::write_file;

TEST(SetPath, CreatesNestedMaps) {
  YAML::Node root = YAML::Load("{a: 1}");
  set_path(root, "params.model.size", YAML::Load("xl"));
  EXPECT_EQ(root["params"]["model"]["size"].as<std::string>(), "xl");
  EXPECT_EQ(root["a"].as<int>(), 1);
}

TEST(SetPath, MatchesDottedSweepKeysGreedily) {
  YAML::Node root = YAML::Load("{sweep: {model.size: [small, xl], batch: [1]}}");
  set_path(root, "sweep.model.size", YAML::Load("[medium]"));
  ASSERT_EQ(root["sweep"]["model.size"].size(), 1u);
  EXPECT_EQ(root["sweep"]["model.size"][0].as<std::string>(), "medium");
  EXPECT_FALSE(root["sweep"]["model"]);
}

TEST(SetPath, NewSweepAxisStaysOneDottedKey) {
  YAML::Node root = YAML::Load("{sweep: {batch: [1]}}");
  set_path(root, "sweep.model.d_model", YAML::Load("[64, 128]"));
  EXPECT_EQ(root["sweep"]["model.d_model"].size(), 2u);
}

TEST(SetPath, AddressesListEntriesByNameOrIndex) {
  YAML::Node root = YAML::Load("{parts: [{name: a, params: {x: 1}}, {name: b, params: {x: 2}}]}");
  set_path(root, "parts.b.params.x", YAML::Load("5"));
  set_path(root, "parts.0.params.x", YAML::Load("7"));
  EXPECT_EQ(root["parts"][1]["params"]["x"].as<int>(), 5);
  EXPECT_EQ(root["parts"][0]["params"]["x"].as<int>(), 7);
}

TEST(SetPath, PluginNameGainsOptions) {
  YAML::Node root = YAML::Load("{params: {optimizer: sgd}}");
  set_path(root, "params.optimizer.lr", YAML::Load("0.5"));
  EXPECT_EQ(root["params"]["optimizer"]["name"].as<std::string>(), "sgd");
  EXPECT_DOUBLE_EQ(root["params"]["optimizer"]["lr"].as<double>(), 0.5);
}

TEST(LoadExperiment, SetOverridesWinOverSmokeOverrides) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml",
                               "experiment: e\ntask: echo\nparams: {value: 1}\nsmoke: {params.value: 2}\n");
  const ExperimentSpec exp = load_experiment(file, {"params.value=3"}, true);
  EXPECT_EQ(exp.parts.at(0).params["value"].as<int>(), 3);
  EXPECT_EQ(load_experiment(file, {}, true).parts.at(0).params["value"].as<int>(), 2);
  EXPECT_EQ(load_experiment(file, {}, false).parts.at(0).params["value"].as<int>(), 1);
}

TEST(LoadExperiment, UnknownTopLevelKeyNamesFileLineAndClosestKey) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml", "experiment: e\ntask: echo\nsweeps: {}\n");
  EXPECT_EQ(error_of([&] { load_experiment(file, {}, false); }),
            file.string() + ":3:1: sweeps: unknown key; did you mean 'sweep'?");
}

TEST(LoadExperiment, YamlSyntaxErrorNamesTheLine) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml", "experiment: e\nparams: {a: [1, 2}\n");
  EXPECT_NE(error_of([&] { load_experiment(file, {}, false); }).find(file.string() + ":2:"), std::string::npos);
}

TEST(LoadExperiment, SetWithoutEqualsIsRejected) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml", "experiment: e\ntask: echo\n");
  EXPECT_EQ(error_of([&] { load_experiment(file, {"params.value"}, false); }),
            "--set params.value: expected key.path=value");
}

TEST(LoadExperiment, SmokeWithoutSmokeBlockIsAnError) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml", "experiment: e\ntask: echo\n");
  EXPECT_EQ(error_of([&] { load_experiment(file, {}, true); }),
            file.string() + ": --smoke given but the experiment has no 'smoke:' overrides");
}

TEST(LoadExperiment, MissingFileIsOneLine) {
  EXPECT_EQ(error_of([] { load_experiment("/nonexistent/x.yaml", {}, false); }),
            "/nonexistent/x.yaml: no such experiment file");
}

TEST(ExperimentParts, PartsInheritTopLevelMeasureAndMergeTheirOwn) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml",
                               "experiment: e\nmeasure: {warmup_steps: 2, measured_steps: 4}\n"
                               "parts:\n  - {name: a, task: echo, measure: {measured_steps: 9}}\n"
                               "  - {name: b, task: echo}\n");
  const auto parts = load_experiment(file, {}, false).parts;
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].measure["warmup_steps"].as<int>(), 2);
  EXPECT_EQ(parts[0].measure["measured_steps"].as<int>(), 9);
  EXPECT_EQ(parts[1].measure["measured_steps"].as<int>(), 4);
}

TEST(ExperimentParts, UnknownPartKeyIsRejected) {
  const auto file = write_file(fresh_dir("cfg") / "e.yaml",
                               "experiment: e\nparts:\n  - {name: a, task: echo, parms: {}}\n");
  EXPECT_EQ(error_of([&] { load_experiment(file, {}, false); }),
            file.string() + ":3:27: parts.0.parms: unknown key; did you mean 'params'?");
}

}  // namespace
}  // namespace runner
