// `include:`: an experiment file written as a few lines over a shared base.
#include <gtest/gtest.h>

#include "config/experiment.hpp"
#include "error_of.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::error_of;
using testing::fresh_dir;
using testing::write_file;

const char* kBase =
    "experiment: base\n"
    "device: cuda\n"
    "measure: {warmup_steps: 3, measured_steps: 10}\n"
    "parts:\n"
    "  - name: one\n"
    "    task: echo\n"
    "    params: {value: 1, label: a}\n"
    "  - name: two\n"
    "    task: echo\n"
    "    params: {value: 2}\n"
    "smoke: {measure.measured_steps: 1}\n"
    "report:\n"
    "  - {id: first, tables: []}\n"
    "  - {id: second, tables: []}\n";

TEST(Include, MapsMergeAndNamedListEntriesMergeByName) {
  const auto dir = fresh_dir("include");
  write_file(dir / "base.yaml", kBase);
  const auto file = write_file(dir / "derived.yaml",
                               "include: base.yaml\n"
                               "experiment: derived\n"
                               "measure: {measured_steps: 20}\n"
                               "parts:\n"
                               "  - {name: one, params: {value: 5}}\n"
                               "  - {name: three, task: echo}\n"
                               "report:\n"
                               "  - {id: second, enabled: false}\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  // The document as loaded (includes merged), before the spec is parsed from it.
  ExperimentDocument loaded = load_document(file);
  const YAML::Node d = resolve_document(loaded, {}, false).document;
  EXPECT_EQ(exp.name, "derived");
  EXPECT_FALSE(d["include"]);
  EXPECT_EQ(d["device"].as<std::string>(), "cuda");
  EXPECT_EQ(d["measure"]["warmup_steps"].as<int>(), 3);
  EXPECT_EQ(d["measure"]["measured_steps"].as<int>(), 20);
  ASSERT_EQ(d["parts"].size(), 3u);
  EXPECT_EQ(d["parts"][0]["params"]["value"].as<int>(), 5);
  EXPECT_EQ(d["parts"][0]["params"]["label"].as<std::string>(), "a");
  EXPECT_EQ(d["parts"][0]["task"].as<std::string>(), "echo");
  EXPECT_EQ(d["parts"][2]["name"].as<std::string>(), "three");
  // The report switched off is left out; the other keeps no `enabled` key.
  ASSERT_EQ(d["report"].size(), 1u);
  EXPECT_EQ(d["report"][0]["id"].as<std::string>(), "first");
  EXPECT_EQ(exp.parts.size(), 3u);
  EXPECT_EQ(exp.device, "cuda");
  EXPECT_TRUE(exp.has_report);
  // The stored config is self-contained: no include left, the base's values written out.
  const std::string& stored = exp.resolved;
  EXPECT_EQ(stored.find("include"), std::string::npos);
  EXPECT_NE(stored.find("warmup_steps: 3"), std::string::npos);
}

TEST(Include, SmokeOverridesOfTheBaseApply) {
  const auto dir = fresh_dir("include");
  write_file(dir / "base.yaml", kBase);
  const auto file = write_file(dir / "d.yaml", "include: [base.yaml]\nexperiment: d\n");
  const ExperimentSpec exp = load_experiment(file, {"parts.two.params.value=7"}, true);
  EXPECT_EQ(exp.parts.at(0).measure["measured_steps"].as<int>(), 1);
  EXPECT_EQ(exp.parts.at(1).params["value"].as<int>(), 7);
}

TEST(Include, LaterIncludesAndTheFileItselfWin) {
  const auto dir = fresh_dir("include");
  write_file(dir / "a.yaml", "device: cpu\nseed: 1\n");
  write_file(dir / "b.yaml", "seed: 2\n");
  const auto file = write_file(dir / "c.yaml", "include: [a.yaml, b.yaml]\nexperiment: c\ntask: echo\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  EXPECT_EQ(exp.parts.at(0).precision_seed["seed"].as<int>(), 2);
  EXPECT_EQ(exp.device, "cpu");
  const auto over = write_file(dir / "d.yaml", "include: [a.yaml, b.yaml]\nexperiment: d\ntask: echo\nseed: 3\n");
  EXPECT_EQ(load_experiment(over, {}, false).parts.at(0).precision_seed["seed"].as<int>(), 3);
}

TEST(Include, NestedIncludesResolveRelativeToEachFile) {
  const auto dir = fresh_dir("include");
  std::filesystem::create_directories(dir / "base");
  write_file(dir / "base" / "root.yaml", "task: echo\nseed: 4\n");
  write_file(dir / "base" / "mid.yaml", "include: root.yaml\nseed: 5\n");
  const auto file = write_file(dir / "top.yaml", "include: base/mid.yaml\nexperiment: top\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  EXPECT_EQ(exp.parts.at(0).precision_seed["seed"].as<int>(), 5);
  EXPECT_EQ(exp.parts.at(0).task, "echo");
}

TEST(Include, CyclesAreRefusedWithTheChain) {
  const auto dir = fresh_dir("include");
  write_file(dir / "a.yaml", "include: b.yaml\nexperiment: a\ntask: echo\n");
  write_file(dir / "b.yaml", "include: a.yaml\n");
  const std::string e = error_of([&] { load_experiment(dir / "a.yaml", {}, false); });
  EXPECT_NE(e.find("b.yaml:1:10: include: cycle a.yaml -> b.yaml -> a.yaml"), std::string::npos) << e;
  write_file(dir / "self.yaml", "experiment: s\ninclude: self.yaml\n");
  const std::string s = error_of([&] { load_experiment(dir / "self.yaml", {}, false); });
  EXPECT_NE(s.find("self.yaml:2:10: include: cycle self.yaml -> self.yaml"), std::string::npos) << s;
}

TEST(Include, MissingFileAndBadValuesNameTheLine) {
  const auto dir = fresh_dir("include");
  const auto file = write_file(dir / "m.yaml", "experiment: m\ntask: echo\ninclude: nowhere.yaml\n");
  const std::string e = error_of([&] { load_experiment(file, {}, false); });
  EXPECT_NE(e.find("m.yaml:3:10: include: no file 'nowhere.yaml' next to m.yaml"), std::string::npos) << e;
  const auto bad = write_file(dir / "n.yaml", "experiment: n\ninclude: {a: 1}\n");
  const std::string b = error_of([&] { load_experiment(bad, {}, false); });
  EXPECT_NE(b.find("n.yaml:2:10: include: expected a file name or a list"), std::string::npos) << b;
}

TEST(Include, ErrorsInTheBaseNameTheBaseFile) {
  const auto dir = fresh_dir("include");
  write_file(dir / "base.yaml", "task: echo\nmeasure: {warmup_steps: 1}\nparamz: {value: 1}\n");
  const auto file = write_file(dir / "top.yaml", "include: base.yaml\nexperiment: top\n");
  const std::string e = error_of([&] { load_experiment(file, {}, false); });
  EXPECT_NE(e.find("base.yaml:3:1: paramz: unknown key; did you mean 'params'?"), std::string::npos) << e;
  write_file(dir / "syntax.yaml", "task: [echo\n");
  const auto top2 = write_file(dir / "top2.yaml", "include: syntax.yaml\nexperiment: top\n");
  const std::string s = error_of([&] { load_experiment(top2, {}, false); });
  EXPECT_NE(s.find("syntax.yaml:"), std::string::npos) << s;
  EXPECT_NE(s.find("YAML syntax error"), std::string::npos) << s;
  write_file(dir / "dup.yaml", "seed: 1\nseed: 2\n");
  const auto top3 = write_file(dir / "top3.yaml", "include: dup.yaml\nexperiment: top\ntask: echo\n");
  const std::string d = error_of([&] { load_experiment(top3, {}, false); });
  EXPECT_NE(d.find("dup.yaml:2:1: seed: duplicate key"), std::string::npos) << d;
}

TEST(Include, EveryQuestionFileOfTheProjectLoads) {
  // One experiment file per question id of the spec; the DDP ones are a few lines over
  // ddp_benchmarking.yaml and ddp_correctness.yaml.
  for (const char* id : {"naive_ddp", "naive_ddp_benchmarking", "minimal_ddp_flat_benchmarking",
                         "ddp_overlap_individual_parameters", "ddp_overlap_individual_parameters_benchmarking",
                         "ddp_overlap_bucketed", "ddp_bucketed_benchmarking", "optimizer_state_sharding"}) {
    const auto file = std::filesystem::path(RUNNER_SOURCE_DIR) / "experiments" / (std::string(id) + ".yaml");
    const ExperimentSpec exp = load_experiment(file, {}, false);
    EXPECT_EQ(exp.name, id);
    ASSERT_FALSE(exp.reports().empty()) << id;
    bool has_own_report = false;
    for (const auto& r : exp.reports())
      if (r.id == id) has_own_report = true;
    EXPECT_TRUE(has_own_report || std::string(id).find("benchmarking") != std::string::npos) << id;
  }
}

}  // namespace
}  // namespace runner
