// Every task declares the metrics and labels its records carry, so a report spec over
// any task is checked before a run: a misspelt metric, row or pivot is a one-line
// error with file:line:col and exit code 2, and nothing runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "report_check.hpp"
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
         "params: {mode: forward}\n"
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
