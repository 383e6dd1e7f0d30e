// Issue 28's hostile input: every file of tests/hostile/config is refused with
// the one line its `# expect:` names (no crash, no hang, no raw exception), and
// the read side, the run directory and the limits hold against the rest.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <functional>
#include <sstream>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "config/report_spec_check.hpp"
#include "output/run_dir.hpp"
#include "config/sweep.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::test_registry;
using testing::write_file;

const std::filesystem::path kHostile = std::filesystem::path(RUNNER_SOURCE_DIR) / "tests" / "hostile";

// The refusal of one hostile experiment file, or "(accepted)".
std::string refusal(const std::filesystem::path& file) {
  std::vector<std::string> overrides;
  bool smoke = false;
  std::istringstream lines(read_file(file));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#set ", 0) == 0) overrides.push_back(line.substr(5));
    if (line == "#smoke") smoke = true;
  }
  try {
    const ExperimentSpec exp = load_experiment(file, overrides, smoke);
    validate_report(exp, expand_points(exp, test_registry()), test_registry());
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const report::SpecError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(HostileCorpus, EveryFileIsRefusedWithTheLineItExpects) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kHostile / "config")) {
    ++files;
    const std::string text = read_file(entry.path());
    const std::string first = text.substr(0, text.find('\n'));
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << entry.path() << " has no '# expect: <message>' first line";
    const std::string expected = first.substr(10);
    const std::string message = refusal(entry.path());
    EXPECT_NE(message.find(expected), std::string::npos) << entry.path() << "\n  got:      " << message
                                                         << "\n  expected: " << expected;
    EXPECT_EQ(message.find('\n'), std::string::npos) << entry.path() << ": not one line: " << message;
    EXPECT_TRUE(std::none_of(message.begin(), message.end(), [](char c) { return c > 0 && c < 0x20; }))
        << entry.path() << ": raw control characters in: " << message;
    const bool names_origin = message.find(entry.path().string()) != std::string::npos ||
                              message.find("--set") != std::string::npos;
    EXPECT_TRUE(names_origin) << entry.path() << ": names neither the file nor the flag: " << message;
  }
  EXPECT_GE(files, 20);
}

TEST(HostileCorpus, SetValuesMustBeUtf8) {
  const auto file = write_file(fresh_dir("hostile-utf8") / "e.yaml", "experiment: e\ntask: echo\n");
  EXPECT_THROW(load_experiment(file, {"params.word=caf\xe9"}, false), ConfigError);
  EXPECT_NO_THROW(load_experiment(file, {"params.word=caf\xc3\xa9"}, false));
}

TEST(HostileCorpus, MaxPointsIsAWholeNumberWithinTheCeiling) {
  EXPECT_EQ(parse_max_points("100"), 100u);
  EXPECT_EQ(parse_max_points(std::to_string(kMaxPointsCeiling)), kMaxPointsCeiling);
  for (const std::string bad : {"-1", "0", "", "1e9", "18446744073709551615", "1000001", "12abc"}) {
    try {
      parse_max_points(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "--max-points " + bad + ": expected a whole number from 1 to 1000000 "
                                       "(every point is held in memory)");
    }
  }
}

// What the report reader says of a hostile records file (a std::runtime_error is the only
// refusal it may give); "(read)" when it took the file.
std::string report_reader_error(const std::filesystem::path& file) {
  try {
    report::read_results(file);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(read)";
}

TEST(HostileCorpus, DeepRecordsAreRefusedByTheReportReaderWithFileAndLine) {
  const auto file = kHostile / "records" / "deep_params.jsonl";
  EXPECT_EQ(report_reader_error(file),
            file.string() + ":1: nested more than 64 levels deep (not a record the runner writes)");
}

TEST(HostileCorpus, RecordsOfTheWrongJsonTypesAreNamedWithFileAndLine) {
  const auto file = kHostile / "records" / "wrong_types.jsonl";
  EXPECT_EQ(report_reader_error(file),
            file.string() + ":1: experiment is an integer, expected text (not a record the runner writes)");
}

TEST(HostileCorpus, ANumberPastDoublesRangeIsNamedWithFileAndLine) {
  const auto file = kHostile / "records" / "number_overflow.jsonl";
  const std::string what = report_reader_error(file);
  EXPECT_EQ(what.rfind(file.string() + ":2: unreadable JSON: ", 0), 0u) << what;
  EXPECT_NE(what.find("(not a record the runner writes)"), std::string::npos) << what;
}

TEST(HostileCorpus, ResumeRefusesASymlinkedResultsFile) {
  const auto dir = fresh_dir("hostile-symlink");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  RunDirectory run = prepare_run_directory(exp, {}, false, dir / "run", {});
  run.lock.reset();  // that run has ended: its directory is free to resume
  const auto victim = write_file(dir / "victim.txt", "precious\n");
  std::filesystem::create_symlink(victim, run.path / "results.jsonl");
  try {
    prepare_run_directory(exp, {}, false, {}, run.path);
    FAIL() << "resumed through a link";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--resume " + run.path.string() + ": results.jsonl is a symbolic link; a run "
                                     "directory holds its own files (copy the run to a new directory first)");
  }
  EXPECT_EQ(read_file(victim), "precious\n");
}

// In a child limited to files of `max_bytes` (SIGXFSZ ignored, so writes fail
// with EFBIG the way a full disk fails them with ENOSPC): 0 when `body` passed.
int with_file_size_limit(rlim_t max_bytes, const std::function<bool()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{max_bytes, max_bytes};
    setrlimit(RLIMIT_FSIZE, &limit);
    _exit(body() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(HostileCorpus, AFullDiskLeavesNoEmptyConfigAndSaysWhy) {
  const auto dir = fresh_dir("hostile-full");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\n");
  const ExperimentSpec exp = load_experiment(file, {}, false);
  const auto out = dir / "run";
  EXPECT_EQ(with_file_size_limit(0, [&] {
              try {
                prepare_run_directory(exp, {}, false, out, {});
              } catch (const ConfigError& e) {
                const std::string msg = e.what();
                return msg == out.string() + "/config.yaml: cannot write (File too large); nothing was run. Free "
                                             "space or choose another directory with --out";
              }
              return false;
            }),
            0);
  EXPECT_FALSE(std::filesystem::exists(out)) << "the failed run left its directory";
}

TEST(HostileCorpus, AFullDiskWhileWritingReportsSaysWhyAndKeepsTheOldFile) {
  const auto dir = fresh_dir("hostile-full-report");
  const YAML::Node node = YAML::Load("{id: r, tables: [{name: t, rows: [item], pivot: value, metric: value}]}");
  const auto spec = report::parse_report_spec(node, "e.yaml");
  const std::vector<nlohmann::json> records = {nlohmann::json::parse(
      R"({"part":"main","point":0,"status":"ok","params":{"value":1},"labels":{"item":"a"},"metrics":{"value":{"unit":"","value":1}}})")};
  std::filesystem::create_directories(dir / "r");
  write_file(dir / "r" / "r.md", "old report\n");
  EXPECT_EQ(with_file_size_limit(10, [&] {
              try {
                report::write_report(spec, records, dir);
              } catch (const std::runtime_error& e) {
                return std::string(e.what()).find(": cannot write (File too large); the earlier file is unchanged") !=
                       std::string::npos;
              }
              return false;
            }),
            0);
  EXPECT_EQ(read_file(dir / "r" / "r.md"), "old report\n");
}

}  // namespace
}  // namespace runner
