// The history and compare against hostile input and faults (issue 28): resumed
// runs and parallel imports reach the store once, relative queries find a
// baseline when newer runs exist, and record files that nest too deeply, hold
// wrong JSON types, numbers past double's range or nothing at all get one line
// naming the file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "history/compare.hpp"
#include "history/store.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::env_json;
using testing::fresh_dir;
using testing::record;
using testing::stored;

const std::filesystem::path kHostile = std::filesystem::path(RUNNER_SOURCE_DIR) / "tests" / "hostile" / "records";

std::filesystem::path run_dir_with(const std::filesystem::path& dir, const std::vector<nlohmann::json>& lines) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.yaml") << "# resolved from demo.yaml\nexperiment: demo\n";
  std::ofstream out(dir / "results.jsonl");
  for (const auto& j : lines) out << j.dump() << "\n";
  return dir;
}

std::filesystem::path run_dir_from(const std::filesystem::path& dir, const std::string& hostile_file) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.yaml") << "# resolved from demo.yaml\nexperiment: demo\n";
  std::filesystem::copy_file(kHostile / hostile_file, dir / "results.jsonl");
  return dir;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HistoryHostile, AResumedRunContinuesItsRunWithoutDuplicates) {
  const auto dir = fresh_dir("hostile-resume");
  HistoryStore store(dir / "h.sqlite");
  const auto run = dir / "run";
  // Killed after point 0 reached both files and point 1 only results.jsonl;
  // point 2 was interrupted and runs again.
  nlohmann::json interrupted = record(2, 3, {}, 0, "interrupted");
  const auto id = store.begin_run("demo", run, env_json(), false);
  store.add_point(id, stored({record(0, 1, around(1.0))}));
  const std::vector<nlohmann::json> recorded = {record(0, 1, around(1.0)), record(1, 2, around(2.0)), interrupted};
  EXPECT_EQ(store.resume_run("demo", run, env_json(), false, stored(recorded)), id);
  EXPECT_TRUE(store.run(id)->finished.empty());  // running again
  store.add_point(id, stored({record(2, 3, around(3.0))}));
  store.finish_run(id);
  const auto records = store.records(id);
  ASSERT_EQ(records.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].point, i);
    EXPECT_EQ(records[i].status, "ok");
  }
  EXPECT_EQ(store.runs({}).size(), 1u);
  EXPECT_EQ(store.run(id)->status, "ok");

  // A run the store never saw (the history was off) arrives whole on resume.
  const auto other = store.resume_run("demo", dir / "other", env_json(), false, stored(recorded));
  EXPECT_NE(other, id);
  EXPECT_EQ(store.records(other).size(), 2u);  // the interrupted point runs again
}

TEST(HistoryHostile, ParallelImportsOfTheSameRunsAddEachOnce) {
  const auto dir = fresh_dir("hostile-parallel-import");
  for (int r = 0; r < 4; ++r)
    run_dir_with(dir / "runs" / ("r" + std::to_string(r)), {record(0, 1, around(1.0)), record(1, 2, around(2.0))});
  { HistoryStore create(dir / "h.sqlite"); }
  std::vector<pid_t> children;
  for (int c = 0; c < 4; ++c) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        HistoryStore store(dir / "h.sqlite");
        for (int r = 0; r < 4; ++r) store.import_run_dir(dir / "runs" / ("r" + std::to_string(r)));
        _exit(0);
      } catch (const std::exception& e) {
        fprintf(stderr, "import failed: %s\n", e.what());
        _exit(1);
      }
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  HistoryStore store(dir / "h.sqlite");
  const auto runs = store.runs({});
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& r : runs) EXPECT_EQ(r.records, 2);
}

TEST(HistoryHostile, ImportOfAnInterruptedThenResumedRunKeepsOneRecordPerPoint) {
  const auto dir = fresh_dir("hostile-import-resumed");
  const auto run = run_dir_with(dir / "run", {record(0, 1, around(1.0)), record(1, 2, {}, 0, "interrupted"),
                                              record(1, 2, around(2.0))});
  HistoryStore store(dir / "h.sqlite");
  const auto id = store.import_run_dir(run);
  const auto records = store.records(id);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].status, "ok");
}

TEST(HistoryHostile, LastGoodFindsTheBaselineOlderThanARunWhenNewerRunsExist) {
  const auto dir = fresh_dir("hostile-last-good");
  HistoryStore store(dir / "h.sqlite");
  auto add = [&](const std::string& started) {
    const auto id = store.begin_run("demo", {}, env_json(), false, started);
    store.add_point(id, stored({record(0, 1, around(1.0))}));
    store.finish_run(id);
    return id;
  };
  const auto first = add("2026-11-01T00:00:00Z");
  const auto second = add("2026-11-02T00:00:00Z");
  add("2026-11-03T00:00:00Z");  // newer than the run judged below
  const Side b = resolve_side("run:" + std::to_string(second), &store, nullptr, "");
  for (const std::string spec : {"last", "last-good"}) {
    const Side a = resolve_side(spec, &store, &b, "");
    ASSERT_EQ(a.runs.size(), 1u) << spec;
    EXPECT_EQ(a.runs[0].id, first) << spec;
  }
}

TEST(HistoryHostile, DeeplyNestedRecordsAreRefusedWithTheFileAndLine) {
  const auto dir = fresh_dir("hostile-deep");
  const auto run = run_dir_from(dir / "run", "deep_params.jsonl");
  HistoryStore store(dir / "h.sqlite");
  const std::string import = error_of([&] { store.import_run_dir(run); });
  EXPECT_EQ(import, (run / "results.jsonl").string() + ":1: nested more than 64 levels deep (not a record the runner writes)");
  EXPECT_TRUE(store.runs({}).empty());
  const std::string compare = error_of([&] { resolve_side(run.string(), &store, nullptr, ""); });
  EXPECT_EQ(compare, import);
  // A million levels in any field.
  const std::string million = "{\"x\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  EXPECT_THROW(parse_record_line(million), std::runtime_error);
}

// nlohmann throws out_of_range, not parse_error, for a number past double's range:
// once uncaught, it ended the importing process (found by fuzz.short_run).
TEST(HistoryHostile, ANumberPastDoublesRangeIsRefusedWithTheFileAndLine) {
  const auto dir = fresh_dir("hostile-overflow");
  const auto run = run_dir_from(dir / "run", "number_overflow.jsonl");
  HistoryStore store(dir / "h.sqlite");
  const std::string import = error_of([&] { store.import_run_dir(run); });
  EXPECT_EQ(import.rfind((run / "results.jsonl").string() + ":2: unreadable JSON: ", 0), 0u) << import;
  EXPECT_NE(import.find("number overflow"), std::string::npos) << import;
  EXPECT_TRUE(store.runs({}).empty());
  EXPECT_EQ(error_of([&] { resolve_side(run.string(), &store, nullptr, ""); }), import);
}

// Import and compare stored what `runner report` refuses (status 3 stored as a
// status, a part that is a list): now they refuse it too, naming file and line.
TEST(HistoryHostile, WrongJsonTypesAreRefusedAsTheReportRefusesThem) {
  const auto dir = fresh_dir("hostile-types");
  const auto run = run_dir_from(dir / "run", "wrong_types.jsonl");
  HistoryStore store(dir / "h.sqlite");
  const std::string import = error_of([&] { store.import_run_dir(run); });
  EXPECT_EQ(import, (run / "results.jsonl").string() +
                        ":1: experiment is an integer, expected text (not a record the runner writes)");
  EXPECT_TRUE(store.runs({}).empty());
  EXPECT_EQ(error_of([&] { resolve_side(run.string(), &store, nullptr, ""); }), import);
}

// The history was locked mid-run: the store held 1 of the run's 3 points, unfinished
// ("killed"), and --import answered "1 already in" without repairing it.
TEST(HistoryHostile, ImportCompletesARunTheStoreHoldsInPart) {
  const auto dir = fresh_dir("hostile-partial");
  const auto run = run_dir_with(dir / "run", {record(0, 1, around(1.0)), record(1, 2, around(2.0)),
                                              record(2, 3, around(3.0))});
  HistoryStore store(dir / "h.sqlite");
  const auto id = store.begin_run("demo", run, env_json(), false);
  store.add_point(id, stored({record(0, 1, around(1.0))}));
  EXPECT_EQ(store.import_run_dir(run), id);
  const auto records = store.records(id);
  ASSERT_EQ(records.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(records[i].point, i);
  EXPECT_FALSE(store.run(id)->finished.empty());
  EXPECT_EQ(store.import_run_dir(run), 0);  // whole now: nothing to do
  EXPECT_EQ(store.runs({}).size(), 1u);
}

TEST(HistoryHostile, CompareOfARunWithoutRecordsSaysSo) {
  const auto dir = fresh_dir("hostile-empty");
  const auto empty = run_dir_from(dir / "empty", "empty.jsonl");
  const auto full = run_dir_with(dir / "full", {record(0, 1, around(1.0))});
  const std::string msg = error_of([&] { compare(resolve_side(full.string(), nullptr, nullptr, ""),
                                                 resolve_side(empty.string(), nullptr, nullptr, ""), {}); });
  EXPECT_EQ(msg, (empty / "results.jsonl").string() + ": no records yet (the run recorded no point)");
}

}  // namespace
}  // namespace runner::history
