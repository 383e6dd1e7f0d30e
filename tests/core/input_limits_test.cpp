// Hostile input that once crashed, hung or passed: each is now one line naming the
// file or flag, exit code 2, before any point runs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>

#include "runner/device.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

// 10,000 nested parentheses in a report value: a stack overflow (exit 139) once.
TEST(InputLimits, DeeplyNestedValueExpressionIsRefusedNotACrash) {
  const auto dir = fresh_dir("limits-nest");
  const std::string expr = std::string(10000, '(') + "1" + std::string(10000, ')');
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\nreport:\n  id: e\n  tables:\n"
                                               "    - {name: t, rows: [item], columns: [{metric: value}]}\n  values:\n"
                                               "    - {name: v, expr: \"" + expr + "\"}\n");
  const auto r = run_runner(file.string() + " --device cpu --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 400);
  EXPECT_NE(r.output.find("nested more than 100 levels deep"), std::string::npos) << r.output.substr(0, 400);
}

// A part whose name is a map, addressed by --set: an uncaught yaml-cpp conversion error, exit 1.
TEST(InputLimits, ASetThroughAPartNamedByAMapIsExitTwo) {
  const auto dir = fresh_dir("limits-set");
  const auto file = write_file(dir / "e.yaml", "experiment: e\nparts: [{name: {x: 1}, task: echo}]\n");
  const auto r = run_runner(file.string() + " --device cpu --dry-run --set parts.one.params.value=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("bad conversion"), std::string::npos) << r.output;
}

// `runner /dev/zero` read 4.5 GB; a FIFO hung every command forever.
TEST(InputLimits, OnlyRegularFilesAreReadAsExperimentsOrRecords) {
  const auto dir = fresh_dir("limits-fifo");
  const auto zero = run_runner("/dev/zero --dry-run");
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_NE(zero.output.find("/dev/zero: not a regular file"), std::string::npos) << zero.output;
  const auto fifo = dir / "e.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_runner(fifo.string() + " --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fifo.string() + ": not a regular file"), std::string::npos) << r.output;
  // A run directory whose results.jsonl is a FIFO: report says so instead of waiting.
  const auto run = dir / "run";
  std::filesystem::create_directories(run);
  write_file(run / "config.yaml", "experiment: e\ntask: echo\nreport:\n  id: e\n  tables:\n"
                                  "    - {name: t, rows: [item], columns: [{metric: value}]}\n");
  ASSERT_EQ(mkfifo((run / "results.jsonl").c_str(), 0644), 0);
  const auto report = run_runner("report " + run.string());
  EXPECT_NE(report.exit_code, 0);
  EXPECT_NE(report.output.find("results.jsonl: not a regular file"), std::string::npos) << report.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // Too large to be an experiment: refused before it is read.
  const auto big = dir / "big.yaml";
  std::filesystem::resize_file(write_file(big, "experiment: e\n"), (16u << 20) + 1);
  const auto large = run_runner(big.string() + " --dry-run");
  EXPECT_EQ(large.exit_code, 2) << large.output;
  EXPECT_NE(large.output.find("an experiment file has at most 16 MiB"), std::string::npos) << large.output;
}

// A 300-character report id passed validation and failed once every point had run.
TEST(InputLimits, ALongReportIdIsRefusedBeforeAnythingRuns) {
  const auto dir = fresh_dir("limits-id");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\nreport:\n  id: " + std::string(300, 'a') +
                                                   "\n  tables:\n    - {name: t, rows: [item], columns: [{metric: value}]}\n");
  const auto out = dir / "run";
  const auto r = run_runner(file.string() + " --device cpu --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs an id of at most 100 characters"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out / "results.jsonl"));
}

// `runner submit --help` printed the general usage and exit 0, before `submit` existed
// (it is a command now: output/merge.hpp); any other unknown word still must not.
TEST(InputLimits, HelpForAnUnknownCommandIsAnError) {
  const auto r = run_runner("resubmit --help");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("runner: unknown command: 'resubmit'"), std::string::npos) << r.output;
  EXPECT_EQ(run_runner("report --help").exit_code, 0);
  const auto submit = run_runner("submit --help");
  EXPECT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_NE(submit.output.find("usage: runner submit"), std::string::npos) << submit.output;
}

// On a machine without a GPU, the hint for a GPU-sized experiment was --device cpu,
// which started a 432-point grid; its smoke version is what such a machine can check.
TEST(InputLimits, NoGpuSuggestsTheSmokeVersion) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const auto dir = fresh_dir("limits-smoke");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\ndevice: cuda\n"
                                               "sweep: {value: [1, 2, 3]}\nsmoke: {sweep.value: [1]}\n");
  const auto r = run_runner(file.string() + " --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("try --smoke --device cpu (the experiment's seconds-long version; its full sweep of 3 "
                          "points is sized for a GPU)"),
            std::string::npos)
      << r.output;
}

// `runner quickstart params.batch_size=8` blamed the file's `parts:` line, not the override.
TEST(InputLimits, AnOverrideOfATopLevelKeyInAnExperimentWithPartsBlamesTheOverride) {
  const auto dir = fresh_dir("limits-parts");
  const auto file = write_file(dir / "e.yaml", "experiment: e\nparts:\n  - {name: one, task: echo}\n"
                                               "  - {name: two, task: echo}\n");
  const auto r = run_runner(file.string() + " --dry-run --set params.value=8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("runner: --set params.value=8: this experiment has parts (one, two), so 'params.value' "
                          "names no key; address one part, e.g. parts.one.params.value"),
            std::string::npos)
      << r.output;
}

// Found by a 10-minute libFuzzer run of the config target (tests/fuzz/crashers/
// override-made-parts-a-map): --set parts.x.y=1 on a file without parts made `parts` a
// map, and listing its part names threw YAML::InvalidNode out of the config check.
TEST(InputLimits, AnOverrideThatMakesPartsAMapIsNamed) {
  const auto dir = fresh_dir("limits-parts-map");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\n");
  const auto r = run_runner(file.string() + " --dry-run --set parts.x.y=1 --set sweep.value=[1]");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "runner: --set parts.x.y=1: parts: expected a non-empty list of parts, and this makes it a map; "
                      "an override addresses a part the file has (parts.<name>.<key>)\n");
}

}  // namespace
}  // namespace runner
