// Every task declares the metrics and labels its records carry, so a report spec over
// any task is checked before a run: a misspelt metric, row or pivot is a one-line
// error with file:line:col and exit code 2, and nothing runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "config/experiment.hpp"
#include "config/report_spec_check.hpp"
#include "config/sweep.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::run_runner;
using testing::write_file;

// A train_step experiment whose table is `table` (YAML lines under "tables:").
std::string train_step_experiment(const std::string& table) {
  return "experiment: train_step_table\n"
         "task: train_step\n"
         // A tiny model: the runs only need the records' names (the default 128M-parameter
         // model made one of these runs take 20 s on 2 cores). Still one line: the error
         // positions below are line:column of the table.
         "params: {mode: forward, model: {name: transformer_lm, size: custom, d_model: 32, d_ff: 64, num_layers: 1, "
         "num_heads: 2, vocab_size: 64, context_length: 8}}\n"
         "measure: {warmup_steps: 0, measured_steps: 1}\n"
         "sweep:\n"
         "  batch_size: [4, 8]\n"
         "report:\n"
         "  id: train_step_table\n"
         "  title: Train step\n"
         "  tables:\n" +
         table;
}

struct Refusal {
  std::string table;     // the table's YAML
  std::string expected;  // the output starts with this
  std::string hint;      // and holds this
};

TEST(DeclaredMetrics, MisspeltNamesInATrainStepTableAreRefusedBeforeTheRun) {
  const Refusal cases[] = {
      {"    - {name: t, title: T, rows: [batch_size], pivot: mode, metric: token_per_s}\n",
       "FILE:11:68: report.tables[0].metric: no metric 'token_per_s' in the records of this experiment",
       "; did you mean 'tokens_per_s'?\n"},
      {"    - {name: t, title: T, rows: [batchsize], pivot: mode, metric: tokens_per_s}\n",
       "FILE:11:34: report.tables[0].rows[0]: no parameter or label 'batchsize' in the records of this experiment",
       "; did you mean 'batch_size'?\n"},
      {"    - {name: t, title: T, rows: [batch_size], pivot: context_length, metric: tokens_per_s}\n",
       "FILE:11:54: report.tables[0].pivot: no parameter or label 'context_length' in the records of this "
       "experiment",
       "model.context_length"},
      // env.<field> names the environment a record was taken in; a field no record has is refused.
      {"    - {name: t, title: T, rows: [env.worldsize], pivot: mode, metric: tokens_per_s}\n",
       "FILE:11:34: report.tables[0].rows[0]: no parameter or label 'env.worldsize' in the records of this "
       "experiment",
       "'"},
  };
  for (const Refusal& c : cases) {
    const auto dir = fresh_dir("declared-metrics");
    const auto file = write_file(dir / "train_step_table.yaml", train_step_experiment(c.table));
    const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "run").string());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    std::string expected = "runner: " + c.expected;
    expected.replace(expected.find("FILE"), 4, file.string());
    EXPECT_EQ(r.output.substr(0, expected.size()), expected) << r.output;
    EXPECT_NE(r.output.find(c.hint), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line: " << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "nothing runs before the report spec is checked";
  }
}

TEST(DeclaredMetrics, EnvironmentFieldsAreKeysOfEveryExperiment) {
  const auto dir = fresh_dir("declared-metrics-env");
  const auto file = write_file(
      dir / "train_step_table.yaml",
      train_step_experiment("    - {name: t, title: T, rows: [env.world_size, env.gpu], pivot: mode, metric: tokens_per_s}\n"));
  const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(DeclaredMetrics, EveryTaskAndDdpStrategyDeclaresWhatItRecords) {
  int tasks = 0;
  for (const auto& plugin : testing::test_registry().plugins()) {
    const PluginManifest& m = *plugin.manifest;
    if (plugin.file.parent_path().filename() == "extra") continue;  // test plugins
    // external_python's records are whatever its script prints: names made at run time.
    if (m.kind == PluginKind::Task && m.name != "external_python") {
      ++tasks;
      EXPECT_TRUE(m.metrics && !m.metrics->empty()) << "task/" << m.name << " declares no metrics";
      EXPECT_TRUE(m.labels.has_value()) << "task/" << m.name << " declares no labels (an empty list if it has none)";
    }
    if (m.kind == PluginKind::Ddp)
      EXPECT_TRUE(m.metrics && !m.metrics->empty()) << "ddp/" << m.name << " declares no metrics (what report() adds)";
  }
  EXPECT_GE(tasks, 11);
}

// Every entry of every task's metrics parses, and its conditions name options the task
// has, at every point of every experiment file (a typo would make such points invalid
// or leave a metric unchecked).
TEST(DeclaredMetrics, EveryEntryParsesAtEveryPointOfEveryExperiment) {
  const PluginRegistry& registry = testing::test_registry();
  int points = 0, experiments = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(RUNNER_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    const ExperimentSpec exp = load_experiment(entry.path(), {}, false);
    ++experiments;
    for (const Point& point : expand_points(exp, registry, kDefaultMaxPoints, true)) {
      EXPECT_NO_THROW(required_metrics(point.task, point.params, registry))
          << entry.path().filename().string() << " " << point.part << "[" << point.index << "]";
      ++points;
    }
  }
  EXPECT_GE(experiments, 30);
  EXPECT_GE(points, 500);
}

// The committed runs (GPU measurements, reports/*/data and reports/*/runs/*) against
// the declarations: every ok point holds every metric its task requires of it.
TEST(DeclaredMetrics, CommittedRecordsHoldEveryRequiredMetric) {
  const PluginRegistry& registry = testing::test_registry();
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(RUNNER_SOURCE_DIR) / "reports")) {
    if (entry.path().filename() != "results.jsonl") continue;
    std::map<std::pair<std::string, int>, std::vector<nlohmann::json>> points;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      const auto r = nlohmann::json::parse(line, nullptr, false);
      if (r.is_discarded() || r.value("status", "") != "ok" || !r.contains("task") || !r["point"].is_number()) continue;
      if (r.contains("labels") && r["labels"].contains("profiler")) continue;  // a profiler's own records
      points[{r.value("part", ""), r["point"].get<int>()}].push_back(r);
    }
    for (const auto& [id, records] : points) {
      std::map<std::string, std::string> options;
      for (const auto& [key, value] : records.front()["params"].items())
        options[key] = value.is_string() ? value.get<std::string>() : value.dump();
      std::vector<std::string> required;
      try {
        required = required_metrics(records.front()["task"].get<std::string>(), options, registry);
      } catch (const std::invalid_argument&) {
        continue;  // records older than an option a condition names
      }
      for (const std::string& name : required)
        EXPECT_TRUE(std::any_of(records.begin(), records.end(), [&](const nlohmann::json& r) {
          return r["metrics"].contains(name);
        })) << entry.path().string() << " " << id.first << "[" << id.second << "] lacks '" << name << "'";
      ++checked;
    }
  }
  EXPECT_GE(checked, 300);
}

// Which points must record which metric, by the task's options.
TEST(DeclaredMetrics, ConditionsPickTheRequiredMetricsByOption) {
  const PluginRegistry& registry = testing::test_registry();
  const auto required = [&](const std::string& task, const std::string& options) {
    const auto names = required_metrics(task, resolve_plugin_options(registry, PluginKind::Task, task, options),
                                        registry);
    return std::set<std::string>(names.begin(), names.end());
  };
  const auto forward = required("train_step", "mode: forward");
  EXPECT_TRUE(forward.count("forward_ms") && forward.count("step_ms") && forward.count("loss_last"));
  EXPECT_FALSE(forward.count("backward_ms") || forward.count("optimizer_ms") || forward.count("optimizer_state_gib"));
  EXPECT_FALSE(forward.count("wall_ms") || forward.count("peak_memory_gib")) << "by device or measure settings";
  const auto step = required("train_step", "mode: train_step");
  EXPECT_TRUE(step.count("backward_ms") && step.count("optimizer_ms") && step.count("optimizer_state_gib"));
  EXPECT_FALSE(step.count("collective_ms") || step.count("world_size")) << "no ddp strategy";
  const auto ddp = required("train_step", "{mode: forward_backward, ddp: flat}");
  EXPECT_TRUE(ddp.count("communication_ms") && ddp.count("collective_ms") && ddp.count("world_size"));
  EXPECT_FALSE(ddp.count("buckets")) << "a nested plugin's metrics are never required";
  const auto graphed = required("train_step", "cuda_graph: true");
  EXPECT_FALSE(graphed.count("forward_ms")) << "one graph phase on a GPU";
  EXPECT_TRUE(required("device_ceilings", "op: copy").count("gbps"));
  EXPECT_FALSE(required("device_ceilings", "op: copy").count("tflops"));
  EXPECT_FALSE(required("scaling_model", "").count("measured_step_ms"));
  EXPECT_EQ(declared_metric_name("backward_ms if mode!=forward and cuda_graph=false"), "backward_ms");
  EXPECT_EQ(declared_metric_name("wall_ms?"), "wall_ms");
}

TEST(DeclaredMetrics, ADdpStrategysMetricsJoinItsTasks) {
  const PluginRegistry& registry = testing::test_registry();
  const auto none = declared_metrics("train_step", resolve_plugin_options(registry, PluginKind::Task, "train_step"),
                                     registry);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->count("tokens_per_s"));
  EXPECT_FALSE(none->count("buckets"));
  const auto bucketed = declared_metrics(
      "train_step", resolve_plugin_options(registry, PluginKind::Task, "train_step", "ddp: bucketed"), registry);
  ASSERT_TRUE(bucketed.has_value());
  EXPECT_TRUE(bucketed->count("buckets"));
  EXPECT_TRUE(bucketed->count("collectives_per_step"));
}

TEST(DeclaredMetrics, DescribeListsATasksMetricsAndLabels) {
  const auto r = run_runner("describe task/train_step");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  metrics: forward_ms, backward_ms,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens_per_s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  labels: moment"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace runner
