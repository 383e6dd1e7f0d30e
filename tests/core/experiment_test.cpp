// ExperimentSpec: an experiment file parsed once into the typed object every consumer
// reads (parts, sweep factors, device, processes, history, reports and what they read).
#include <gtest/gtest.h>

#include "config/experiment.hpp"
#include "error_of.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::error_of;
using testing::fresh_dir;
using testing::write_file;

const char* kTwoParts = R"(experiment: typed
description: two parts and a report
question: typed_question
device: cpu
processes: 2
history: typed_history
seed: 3
measure: {warmup_steps: 1}
parts:
  - name: a
    task: echo
    sweep: {value: [1, 2, 3], zip: {label: [x, y], size: [1, 2]}}
  - name: b
    task: echo
    enabled: false
    measure: {measured_steps: 2}
report:
  id: typed
  tables:
    - name: t
      part: a
      rows: [value]
      columns: [{metric: value}]
)";

TEST(ExperimentSpec, EveryKeyIsTyped) {
  const auto file = write_file(fresh_dir("spec") / "typed.yaml", kTwoParts);
  const ExperimentSpec exp = load_experiment(file, {}, false);
  EXPECT_EQ(exp.name, "typed");
  EXPECT_EQ(exp.description, "two parts and a report");
  EXPECT_EQ(exp.question, "typed_question");
  EXPECT_EQ(exp.device, "cpu");
  EXPECT_EQ(exp.device_where, file.string() + ":4:9");
  EXPECT_TRUE(exp.has_processes);
  EXPECT_EQ(exp.processes, 2);
  EXPECT_EQ(exp.history, "typed_history");
  EXPECT_FALSE(exp.has_smoke);
  ASSERT_EQ(exp.parts.size(), 2u);
  const PartSpec& a = exp.parts[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.task, "echo");
  EXPECT_EQ(a.task_where, file.string() + ":11:11");
  // The axis, then the zip group as one factor of paired settings.
  ASSERT_EQ(a.sweep.size(), 2u);
  EXPECT_EQ(a.sweep[0].size(), 3u);
  ASSERT_EQ(a.sweep[1].size(), 2u);
  ASSERT_EQ(a.sweep[1][1].size(), 2u);
  EXPECT_EQ(a.sweep[1][1][0].first, "label");
  EXPECT_EQ(a.sweep[1][1][1].first, "size");
  EXPECT_EQ(a.point_count(), 6u);
  // Top-level defaults reach every part; a part's measure merges over them key by key.
  EXPECT_EQ(a.precision_seed["seed"].as<int>(), 3);
  EXPECT_FALSE(exp.parts[1].enabled);
  EXPECT_EQ(exp.parts[1].measure["warmup_steps"].as<int>(), 1);
  EXPECT_EQ(exp.parts[1].measure["measured_steps"].as<int>(), 2);
  EXPECT_EQ(exp.parts[1].point_count(), 1u);
  EXPECT_EQ(exp.parts_to_run().size(), 1u);
  EXPECT_EQ(exp.parts_to_run(true).size(), 2u);
  // The report is parsed with the experiment, and what its table reads is listed with
  // where the file writes it.
  ASSERT_EQ(exp.reports().size(), 1u);
  EXPECT_EQ(exp.reports()[0].id, "typed");
  ASSERT_EQ(exp.report_readers.size(), 1u);
  const ReportReader& table = exp.report_readers[0];
  EXPECT_EQ(table.path, "report.tables[0]");
  EXPECT_EQ(table.parts.names, std::vector<std::string>{"a"});
  EXPECT_EQ(table.part_where, file.string() + ":21:13");
  ASSERT_EQ(table.names.size(), 2u);
  EXPECT_FALSE(table.names[0].metric);
  EXPECT_EQ(table.names[0].path, "report.tables[0].rows[0]");
  EXPECT_EQ(table.names[0].where, file.string() + ":22:14");
  EXPECT_TRUE(table.names[1].metric);
  EXPECT_EQ(table.names[1].path, "report.tables[0].columns[0].metric");
  // The stored config is the resolved document.
  EXPECT_NE(exp.resolved.find("experiment: typed"), std::string::npos);
}

TEST(ExperimentSpec, AFileWithoutPartsIsOnePartNamedMain) {
  const auto file = write_file(fresh_dir("spec") / "e.yaml", "experiment: e\ntask: echo\nsweep: {value: [1, 2]}\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  ASSERT_EQ(exp.parts.size(), 1u);
  EXPECT_EQ(exp.parts[0].name, "main");
  EXPECT_EQ(exp.parts[0].point_count(), 2u);
  EXPECT_EQ(exp.device, "");
  EXPECT_FALSE(exp.has_processes);
  EXPECT_FALSE(exp.has_report);
  EXPECT_TRUE(exp.reports().empty());
}

// A part's own processes: (a sweep mixing 1-rank and N-rank points, run on a pool) is the
// part's; a file without parts has only the experiment's.
TEST(ExperimentSpec, APartsOwnProcessesIsThePartsAndTheTopLevelOneIsTheExperiments) {
  const auto dir = fresh_dir("spec-processes");
  const ExperimentSpec mixed = load_experiment(
      write_file(dir / "mixed.yaml", "experiment: m\nparts:\n  - {name: one, task: echo}\n"
                                     "  - {name: pair, processes: 2, task: echo}\n  - {name: bad, processes: x, task: echo}\n"),
      {}, false);
  ASSERT_EQ(mixed.parts.size(), 3u);
  EXPECT_FALSE(mixed.parts[0].has_processes);
  EXPECT_TRUE(mixed.parts[1].has_processes);
  EXPECT_EQ(mixed.parts[1].processes, 2);
  EXPECT_NE(mixed.parts[1].processes_where.find("mixed.yaml:4:"), std::string::npos) << mixed.parts[1].processes_where;
  EXPECT_EQ(mixed.parts[2].processes, 0);  // not an integer >= 1: the pool's check names it
  const ExperimentSpec whole =
      load_experiment(write_file(dir / "whole.yaml", "experiment: w\nprocesses: 2\ntask: echo\n"), {}, false);
  EXPECT_TRUE(whole.has_processes);
  EXPECT_EQ(whole.processes, 2);
  EXPECT_FALSE(whole.parts[0].has_processes);
}

TEST(ExperimentSpec, MalformedFieldsNameFileLineAndKey) {
  const auto dir = fresh_dir("spec");
  const auto enabled = write_file(dir / "enabled.yaml",
                                  "experiment: e\nparts:\n  - {name: a, task: echo, enabled: maybe}\n");
  EXPECT_EQ(error_of([&] { load_experiment(enabled, {}, false); }),
            enabled.string() + ":3:36: parts.a.enabled: expected true or false");
  const auto axis = write_file(dir / "axis.yaml", "experiment: e\ntask: echo\nsweep: {value: 3}\n");
  EXPECT_EQ(error_of([&] { load_experiment(axis, {}, false); }),
            axis.string() + ":3:16: sweep.value: an axis needs a non-empty list of values, e.g. [a, b]");
  const auto device = write_file(dir / "device.yaml", "experiment: e\ntask: echo\ndevice: [cpu]\n");
  EXPECT_EQ(error_of([&] { load_experiment(device, {}, false); }),
            device.string() + ":3:9: device: expected one of cpu, cuda, auto");
  const auto report = write_file(dir / "report.yaml",
                                 "experiment: e\ntask: echo\nreport:\n  id: r\n  tables:\n"
                                 "    - {name: t, rows: [value], colums: []}\n");
  // A malformed report throws when the reports are asked for, not when the file loads.
  const ExperimentSpec with_report = load_experiment(report, {}, false);
  EXPECT_EQ(error_of([&] { with_report.reports(); }),
            report.string() + ":6:32: report.tables[0].colums: unknown key; did you mean 'columns'?");
}

TEST(ExperimentSpec, AReportKeyWrittenByASetNamesTheSet) {
  const auto file = write_file(fresh_dir("spec") / "e.yaml",
                               "experiment: e\ntask: echo\nreport:\n  id: r\n  tables:\n"
                               "    - {name: t, rows: [value], columns: [{metric: value}]}\n");
  EXPECT_EQ(error_of([&] { load_experiment(file, {"report.tables.0.stat=middle"}, false).reports(); }),
            "--set report.tables.0.stat=middle: report.tables[0].stat: unknown stat 'middle'; expected n, mean, std, "
            "median, min or max");
}

TEST(StoredRunConfig, ReadsTheExperimentAndParsesItsReportOnlyWhenAsked) {
  const auto dir = fresh_dir("spec");
  // A report spec this runner no longer accepts: reading the config still works.
  const auto config = write_file(dir / "config.yaml",
                                 "# resolved from e.yaml\nexperiment: e\ntask: echo\nreport: {id: r, tables: 3}\n");
  const StoredRunConfig stored(config);
  EXPECT_EQ(stored.experiment_name, "e");
  EXPECT_TRUE(stored.has_report);
  EXPECT_NE(stored.report_text.find("tables: 3"), std::string::npos);
  EXPECT_NE(error_of([&] { stored.report_specs(); }).find(config.string() + ":4:"), std::string::npos);
  const StoredRunConfig bare(write_file(dir / "bare.yaml", "experiment: e\ntask: echo\n"));
  EXPECT_FALSE(bare.has_report);
}

}  // namespace
}  // namespace runner
