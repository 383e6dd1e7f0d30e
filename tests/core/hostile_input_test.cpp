// Input that must be refused before anything runs, with one line that names the
// file (or flag), the key and the fix: malformed files, names that would escape
// their directories, values out of range, sweeps too large to expand, report specs
// that name nothing the records carry.
#include <gtest/gtest.h>

#include <chrono>

#include "report/report.hpp"
#include "config/report_spec_check.hpp"
#include "config/sweep.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::test_registry;
using testing::write_file;

// The error of loading, expanding and checking the report of `yaml`, with the
// file's path replaced by FILE.
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  const auto file = write_file(fresh_dir("hostile") / "e.yaml", yaml);
  try {
    const ExperimentSpec exp = load_experiment(file, overrides, false);
    validate_report(exp, expand_points(exp, test_registry()), test_registry());
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (auto pos = msg.find(file.string()); pos != std::string::npos; pos = msg.find(file.string()))
      msg.replace(pos, file.string().size(), "FILE");
    if (dynamic_cast<const report::SpecError*>(&e)) return "SpecError " + msg;
    return msg;
  }
  return "(no error)";
}

const char* kEcho = "experiment: e\ntask: echo\n";

TEST(HostileConfig, EmptyFileSaysItIsEmptyAndWhatItNeeds) {
  EXPECT_EQ(error_of(""),
            "FILE: the file is empty; an experiment needs at least 'experiment: <name>' and 'task: <task plugin>' "
            "(see experiments/device_ceilings.yaml)");
  EXPECT_EQ(error_of("# only a comment\n").find("FILE: the file is empty"), 0u);
}

TEST(HostileConfig, DirectoryGivenAsExperimentIsOneLine) {
  const auto dir = fresh_dir("hostile-dir");
  try {
    load_experiment(dir, {}, false);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": is a directory; name an experiment file, e.g. "
                                                     "experiments/device_ceilings.yaml");
  }
}

TEST(HostileConfig, DuplicateKeyIsAnError) {
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams: {value: 1}\nparams: {value: 2}\n"),
            "FILE:4:1: params: duplicate key (first at line 3); merge the two entries");
  EXPECT_EQ(error_of("experiment: e\ntask: echo\nparams:\n  value: 1\n  value: 2\n"),
            "FILE:5:3: params.value: duplicate key (first at line 4); merge the two entries");
}

TEST(HostileConfig, ExperimentNameCannotEscapeRunsDirectory) {
  for (const std::string name : {"../../escaped", "/tmp/abs", "a/b", "..", "."}) {
    const std::string msg = error_of("experiment: \"" + name + "\"\ntask: echo\n");
    EXPECT_NE(msg.find("FILE:1:13: experiment: '" + name + "' cannot name a directory"), std::string::npos) << msg;
  }
  EXPECT_EQ(error_of("experiment: ok-name_1.v2\ntask: echo\n"), "(no error)");
}

TEST(HostileConfig, PartNameCannotEscapeArtifactsDirectory) {
  const std::string msg = error_of("experiment: e\nparts:\n  - {name: ../x, task: echo}\n");
  EXPECT_NE(msg.find("parts.0.name: '../x' cannot name a directory"), std::string::npos) << msg;
}

TEST(HostileConfig, SetOnAPartNamesTheFlag) {
  const std::string yaml = "experiment: e\nparts:\n  - {name: one, task: echo}\n";
  EXPECT_EQ(error_of(yaml, {"parts.one.params.valeu=3"}),
            "--set parts.one.params.valeu=3: params.valeu: unknown option; did you mean 'value'?");
}

TEST(HostileConfig, ValuesOutsideDeclaredRangesAreRejected) {
  EXPECT_EQ(error_of(std::string(kEcho) + "params: {sleep_us: -3}\n"),
            "FILE:3:20: params.sleep_us: -3 is out of range; must be between 0 and 1e+07");
  EXPECT_EQ(error_of(std::string(kEcho) + "sweep: {sleep_us: [1, -64]}\n"),
            "FILE:3:23: params.sleep_us: -64 is out of range; must be between 0 and 1e+07");
  EXPECT_EQ(error_of(std::string(kEcho) + "measure: {measured_steps: 0}\n"),
            "FILE:3:27: measure.measured_steps: 0 is out of range; must be between 1 and 1e+09");
  EXPECT_EQ(error_of(std::string(kEcho) + "seed: -1\n"), "FILE:3:7: seed: -1 is out of range; must be at least 0");
}

TEST(HostileConfig, HugeSweepIsRefusedBeforeExpandingWithItsCount) {
  std::string yaml = std::string(kEcho) + "sweep:\n";
  const char* axes[] = {"value", "sleep_us", "word", "seed", "measure.warmup_steps", "measure.measured_steps", "labels"};
  for (const char* axis : axes)  // 10^7 points
    yaml += std::string("  ") + axis + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of(yaml), "FILE: sweep: expands to 10000000 points, more than the limit of 100000; shrink the "
                            "axes or raise the limit with --max-points");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(HostileConfig, CountPointsSaturatesInsteadOfOverflowing) {
  std::string yaml = std::string(kEcho) + "sweep:\n";
  for (int i = 0; i < 25; ++i) yaml += "  a" + std::to_string(i) + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  const auto file = write_file(fresh_dir("hostile") / "e.yaml", yaml);
  EXPECT_EQ(count_points(load_experiment(file, {}, false)), std::numeric_limits<std::size_t>::max());
}

TEST(HostileConfig, AliasBombIsRefused) {
  std::string yaml = "experiment: e\ntask: echo\nsmoke:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i)
    yaml += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" +
            std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]\n";
  EXPECT_NE(error_of(yaml).find("expands to more than 200000 YAML nodes"), std::string::npos) << error_of(yaml);
}

// ---- report spec against the records the points will make -------------------

::testing::AssertionResult starts_with(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not start with '" << prefix << "'";
}

std::string report_error(const std::string& table) {
  return error_of(std::string(kEcho) + "sweep: {value: [1, 2]}\nreport:\n  id: r\n  tables:\n    - " + table + "\n");
}

TEST(HostileReport, WrongMetricRowsPivotWhereOrPartAreConfigErrors) {
  EXPECT_EQ(report_error("{name: t, rows: [item], pivot: value, metric: valeu}"),
            "FILE:7:53: report.tables[0].metric: no metric 'valeu' in the records of this experiment; did you "
            "mean 'value'?");
  EXPECT_EQ(report_error("{name: t, rows: [iten], pivot: value, metric: value}"),
            "FILE:7:24: report.tables[0].rows[0]: no parameter or label 'iten' in the records of this "
            "experiment; did you mean 'item'?");
  EXPECT_TRUE(starts_with(report_error("{name: t, rows: [item], pivot: vlaue, metric: value}"), "FILE:7:38: report.tables[0].pivot: no parameter or label 'vlaue'"));
  EXPECT_TRUE(starts_with(report_error("{name: t, rows: [item], where: {wrd: x}, pivot: value, metric: value}"), "FILE:7:39: report.tables[0].where.wrd: no parameter or label 'wrd'"));
  EXPECT_EQ(report_error("{name: t, part: mian, rows: [item], pivot: value, metric: value}"),
            "FILE:7:23: report.tables[0].part: no part named 'mian'; did you mean 'main'?");
  // A list of parts: each must exist.
  EXPECT_EQ(report_error("{name: t, part: [main, mian], rows: [item], pivot: value, metric: value}"),
            "FILE:7:23: report.tables[0].part: no part named 'mian'; did you mean 'main'?");
  EXPECT_EQ(report_error("{name: t, part: [main], rows: [item], pivot: value, metric: value}"), "(no error)");
  EXPECT_TRUE(starts_with(report_error("{name: t, rows: [item], columns: [{metric: sleep_ms}, {key: wrod}]}"), "FILE:7:67: report.tables[0].columns[1].key: no parameter or label 'wrod'"));
  EXPECT_EQ(report_error("{name: t, rows: [item, optimizer.lr, measure.warmup_steps], pivot: value, metric: word}"),
            "(no error)");
}

TEST(HostileReport, WrongStatIsASpecError) {
  EXPECT_TRUE(starts_with(report_error("{name: t, rows: [item], pivot: value, metric: value, stat: medain}"), "SpecError FILE:7:66: report.tables[0].stat: unknown stat 'medain'"));
}

}  // namespace
}  // namespace runner
