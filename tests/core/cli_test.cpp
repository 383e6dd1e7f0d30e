// The command line as a new user meets it: help per command, version, listing
// experiments, plugin table alignment, suggestions, one-line errors instead of
// raw C++ exceptions, and directories that must not be written into.
#include <gtest/gtest.h>

#include <sstream>

#include "report/report.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

const char* kEcho = R"(experiment: echo_cli
description: two echo points
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep: {value: [1.5, 2.5]}
report:
  id: echo_cli
  tables:
    - {name: values, rows: [item], pivot: value, metric: value, format: "%.1f"}
)";

TEST(Cli, AFilteredRunRendersADashForAValueWhoseRowsItLeftOut) {
  // A value over rows that --filter left out is not a broken spec: the run is partial, so the
  // value renders a dash and the run succeeds (it exited 2 after recording every point).
  const auto dir = fresh_dir("cli_filtered_value");
  write_file(dir / "echo.yaml", R"(experiment: echo_filtered
description: two echo points and a value over the larger
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
sweep: {value: [1.5, 2.5]}
report:
  id: echo_filtered
  values:
    - {name: big, expr: 'column_max("values", "value", "value>=2")', format: "%.1f"}
  tables:
    - {name: values, rows: [value], columns: [{metric: value}], format: "%.1f"}
)");
  const auto whole = run_runner((dir / "echo.yaml").string() + " --device cpu --out " + (dir / "whole").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_NE(read_file(dir / "whole" / "reports" / "echo_filtered" / "echo_filtered.values.tex").find("{2.5}"),
            std::string::npos);
  const auto r = run_runner((dir / "echo.yaml").string() + " --device cpu --filter 'value=1.5' --out " +
                            (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string tex = read_file(dir / "run" / "reports" / "echo_filtered" / "echo_filtered.values.tex");
  EXPECT_EQ(tex.find("{2.5}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("big"), std::string::npos) << tex;
}

TEST(Cli, VersionNamesRunnerLibTorchAndPluginApi) {
  const auto r = run_runner("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("runner 0.1.0 (libtorch=", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("plugin API " + std::to_string(kPluginApiVersion)), std::string::npos) << r.output;
}

TEST(Cli, EachSubcommandHasItsOwnHelp) {
  const auto report = run_runner("report --help");
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_EQ(report.output.rfind("usage: runner report <run-dir> [<run-dir>...] [--reports DIR] [--spec FILE] [--pdf]", 0), 0u) << report.output;
  EXPECT_EQ(run_runner("plugins --help").output.rfind("usage: runner plugins", 0), 0u);
  EXPECT_EQ(run_runner("describe --help").output.rfind("usage: runner describe", 0), 0u);
  EXPECT_EQ(run_runner("list --help").output.rfind("usage: runner list", 0), 0u);
}

TEST(Cli, GeneralHelpHidesTheInternalArgsOption) {
  const auto r = run_runner("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.find("--args"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--max-points"), std::string::npos);
}

TEST(Cli, ListShowsExperimentsWithDescriptionsAndPointCounts) {
  const auto dir = fresh_dir("cli-list");
  write_file(dir / "echo.yaml", kEcho);
  write_file(dir / "broken.yaml", "experiment: x\nexperiment: y\n");
  const auto r = run_runner("list " + dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;  // one file does not load
  EXPECT_NE(r.output.find("echo_cli"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2       two echo points"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does not load: " + (dir / "broken.yaml").string() + ":2:1: experiment: duplicate key"),
            std::string::npos) << r.output;
}

TEST(Cli, ListOfTheProjectExperimentsLoadsEveryFile) {
  const auto r = run_runner(std::string("list ") + RUNNER_SOURCE_DIR + "/experiments");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device_ceilings"), std::string::npos) << r.output;
}

TEST(Cli, PluginsColumnsLineUpWhateverTheNameLength) {
  const auto r = run_runner("plugins");
  std::istringstream lines(r.output);
  std::string header, line;
  std::getline(lines, header);
  const auto description_at = header.find("description");
  ASSERT_NE(description_at, std::string::npos);
  int rows = 0;
  while (std::getline(lines, line) && line.rfind("skipped", 0) != 0) {
    ++rows;
    EXPECT_NE(line[description_at], ' ') << "\n" << header << "\n" << line;  // text starts at the column
    EXPECT_EQ(line[description_at - 1], ' ') << "\n" << header << "\n" << line;
  }
  EXPECT_GT(rows, 5);
}

TEST(Cli, DescribeSuggestsTheClosestPlugin) {
  const auto r = run_runner("describe task/ecoh");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "runner: runner describe: no plugin 'task/ecoh'; did you mean 'task/echo'? (see `runner plugins`)\n");
  EXPECT_NE(run_runner("describe echo").output.find("did you mean 'task/echo'?"), std::string::npos);
  EXPECT_NE(run_runner("describe task/device_ceilings").output.find("size                 int, 1..1048576"),
            std::string::npos) << run_runner("describe task/device_ceilings").output;
}

TEST(Cli, OutAtAFileIsOneLine) {
  const auto dir = fresh_dir("cli-out");
  const auto file = write_file(dir / "echo.yaml", kEcho);
  write_file(dir / "taken", "x");
  const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "taken").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "runner: --out " + (dir / "taken").string() + ": is a file; name a new directory for the run\n");
}

TEST(Cli, OutAtANonEmptyFolderWritesNothingThere) {
  const auto dir = fresh_dir("cli-out");
  const auto file = write_file(dir / "echo.yaml", kEcho);
  std::filesystem::create_directories(dir / "mine");
  write_file(dir / "mine" / "config.yaml", "precious");
  const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "mine").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("exists and is not empty"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir / "mine" / "config.yaml"), "precious");
  EXPECT_FALSE(std::filesystem::exists(dir / "mine" / "log.txt"));
  // An empty folder is fine.
  std::filesystem::create_directories(dir / "empty");
  EXPECT_EQ(run_runner(file.string() + " --device cpu --out " + (dir / "empty").string()).exit_code, 0);
}

TEST(Cli, FolderGivenAsExperimentIsOneLine) {
  const auto dir = fresh_dir("cli-dir");
  const auto r = run_runner(dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "runner: " + dir.string() + ": is a directory; name an experiment file, e.g. "
                      "experiments/device_ceilings.yaml\n");
}

TEST(Cli, MissingPluginPathIsAnError) {
  const auto r = run_runner("plugins --plugin-path /nonexistent/plugins");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "runner: --plugin-path /nonexistent/plugins: no such directory\n");
}

TEST(Cli, GarbageSharedObjectIsSkippedWithTheRealReason) {
  const auto r = run_runner(std::string("plugins --plugin-path ") + RUNNER_TEST_PLUGIN_DIR);
  EXPECT_NE(r.output.find("garbage.so: cannot load: not a shared library (no ELF header)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Bad file descriptor"), std::string::npos);
}

TEST(Cli, WorldWritablePluginDirectoryIsWarned) {
  const auto dir = fresh_dir("cli-open");
  std::filesystem::permissions(dir, std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  const auto r = run_runner("plugins --plugin-path " + dir.string());
  EXPECT_NE(r.output.find("warning: plugin directory " + dir.string() + " is world-writable"), std::string::npos)
      << r.output;
}

TEST(Cli, WrongReportStatIsAnInputErrorBeforeRunning) {
  const auto dir = fresh_dir("cli-stat");
  std::string yaml = kEcho;
  yaml.replace(yaml.find("metric: value,"), 14, "metric: value, stat: medain,");
  const auto file = write_file(dir / "echo.yaml", yaml);
  const auto r = run_runner(file.string() + " --device cpu --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("report.tables[0].stat: unknown stat 'medain'"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(Cli, HugeSweepIsRefusedWithItsCountAndTheLimitIsAnOption) {
  const auto dir = fresh_dir("cli-huge");
  std::string yaml = "experiment: huge\ntask: echo\nsweep:\n";
  for (const char* axis : {"value", "sleep_us", "word", "seed", "measure.warmup_steps", "measure.measured_steps"})
    yaml += std::string("  ") + axis + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  const auto file = write_file(dir / "huge.yaml", yaml);
  const auto r = run_runner(file.string() + " --device cpu --dry-run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("sweep: expands to 1000000 points, more than the limit of 100000"), std::string::npos)
      << r.output;
  EXPECT_NE(run_runner(file.string() + " --device cpu --dry-run --max-points 10").output.find("limit of 10;"),
            std::string::npos);
}

}  // namespace
}  // namespace runner
