// The history store: round trip of records and samples, where the file lives,
// two writing processes at once, a killed run, import of run directories, and
// the run queries compare builds on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "history/store.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::env_json;
using testing::fresh_dir;
using testing::record;
using testing::stored;

std::int64_t count(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr);
  std::int64_t n = -1;
  if (sqlite3_step(s) == SQLITE_ROW) n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return n;
}

std::string integrity(const std::filesystem::path& db) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, nullptr);
  std::string out;
  if (sqlite3_step(s) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
  return out;
}

TEST(HistoryStore, KeepsRecordsWithTheirPerStepSamplesAndEnvironment) {
  const auto dir = fresh_dir("store-roundtrip");
  HistoryStore store(dir / "h.sqlite");
  const auto id = store.begin_run("demo", dir / "run", env_json("Test CPU", "feedbeef0001"), false);
  store.add_point(id, stored({record(0, 64, {1.0, 2.0, 3.0, 4.0}, 5e6)}));
  store.finish_run(id);
  const auto records = store.records(id);
  ASSERT_EQ(records.size(), 1u);
  const MetricValue& step = records[0].metrics.at("step_ms");
  EXPECT_EQ(step.samples, (std::vector<double>{1.0, 2.0, 3.0, 4.0}));
  EXPECT_DOUBLE_EQ(step.center, 2.5);
  EXPECT_EQ(step.unit, "ms");
  EXPECT_DOUBLE_EQ(records[0].metrics.at("peak_bytes").center, 5e6);
  EXPECT_FALSE(records[0].metrics.count("note"));  // text metrics are kept in the store but not compared
  EXPECT_EQ(records[0].params["size"], 64);
  const auto run = store.run(id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->git_commit, "feedbeef0001");
  EXPECT_EQ(run->device_name, "Test CPU");
  EXPECT_EQ(run->libtorch, "2.11.0");
  EXPECT_EQ(run->status, "ok");
  EXPECT_EQ(count(dir / "h.sqlite", "SELECT count(*) FROM record_keys WHERE git_commit = 'feedbeef0001'"), 1);
}

TEST(HistoryStore, RepetitionMeansAreTheSamplesWhenARecordHasThem) {
  nlohmann::json j = record(0, 1, {1.0, 2.0, 3.0});
  j["metrics"]["step_ms"]["repetition_means"] = {1.5, 2.5};
  EXPECT_EQ(parse_record(j).metrics.at("step_ms").samples, (std::vector<double>{1.5, 2.5}));
}

TEST(HistoryStore, PointKeyIgnoresDeviceAndMeasureSettings) {
  const nlohmann::json labels = nlohmann::json::object();
  EXPECT_EQ(point_key("p", {{"size", 1}, {"device", "cpu"}, {"measure.measured_steps", 5}}, labels),
            point_key("p", {{"size", 1}, {"device", "cuda"}, {"measure.measured_steps", 50}}, labels));
  EXPECT_NE(point_key("p", {{"size", 1}}, labels), point_key("p", {{"size", 2}}, labels));
  EXPECT_NE(point_key("p", {{"size", 1}}, {{"item", "a"}}), point_key("p", {{"size", 1}}, {{"item", "b"}}));
}

TEST(HistoryStore, PathComesFromFlagThenEnvironmentThenConfigThenDataDir) {
  setenv("RUNNER_HISTORY", "/tmp/from-env.sqlite", 1);
  EXPECT_EQ(resolve_history_path("/tmp/flag.sqlite", "cfg.sqlite"), "/tmp/flag.sqlite");
  EXPECT_EQ(resolve_history_path("", "cfg.sqlite"), "/tmp/from-env.sqlite");
  unsetenv("RUNNER_HISTORY");
  EXPECT_EQ(resolve_history_path("", "cfg.sqlite"), "cfg.sqlite");
  setenv("XDG_DATA_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(resolve_history_path("", ""), "/tmp/xdg/runner/history.sqlite");
  EXPECT_TRUE(resolve_history_path("off", "").empty());
  unsetenv("XDG_DATA_HOME");
}

TEST(HistoryStore, TwoProcessesWritingAtOnceLoseNothing) {
  const auto dir = fresh_dir("store-two-writers");
  const auto db = dir / "h.sqlite";
  { HistoryStore create_schema(db); }
  constexpr int kPoints = 150;
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        HistoryStore store(db);
        const auto id = store.begin_run("writer" + std::to_string(w), dir / ("run" + std::to_string(w)), env_json(), false);
        for (int p = 0; p < kPoints; ++p) store.add_point(id, stored({record(p, p, around(1.0 + w, 8)), record(p, p + 1000, around(2.0, 8))}));
        store.finish_run(id);
      } catch (const std::exception& e) {
        fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  EXPECT_EQ(count(db, "SELECT count(*) FROM records"), 2 * 2 * kPoints);
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs WHERE finished IS NOT NULL"), 2);
  EXPECT_EQ(integrity(db), "ok");
}

TEST(HistoryStore, AKilledRunLeavesOnlyWholePointsAndShowsAsKilled) {
  const auto dir = fresh_dir("store-killed");
  const auto db = dir / "h.sqlite";
  { HistoryStore create_schema(db); }
  constexpr int kRecordsPerPoint = 25;
  const pid_t pid = fork();
  if (pid == 0) {
    HistoryStore store(db);
    const auto id = store.begin_run("killed", dir / "run", env_json(), false);
    for (int p = 0;; ++p) {
      std::vector<nlohmann::json> point;
      for (int r = 0; r < kRecordsPerPoint; ++r) point.push_back(record(p, r, around(1.0, 6)));
      store.add_point(id, stored(point));
    }
  }
  // Kill it mid-stream, once several points are in.
  for (int i = 0; i < 2000 && count(db, "SELECT count(*) FROM records") < 10 * kRecordsPerPoint; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_GE(count(db, "SELECT count(*) FROM records"), 10 * kRecordsPerPoint);
  EXPECT_EQ(count(db, "SELECT count(*) FROM (SELECT point, count(*) AS n FROM records GROUP BY point) WHERE n <> " +
                          std::to_string(kRecordsPerPoint)),
            0)
      << "a point was stored in part";
  EXPECT_EQ(count(db, "SELECT count(*) FROM metrics WHERE record_id NOT IN (SELECT id FROM records)"), 0);
  HistoryStore store(db);
  const auto runs = store.runs({});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "killed");
  EXPECT_EQ(integrity(db), "ok");
}

TEST(HistoryStore, ImportsARunDirectoryOnceAndKeepsTheWholeLinesOfATornFile) {
  const auto dir = fresh_dir("store-import");
  const auto run = dir / "runs" / "demo" / "20261123T000000Z";
  std::filesystem::create_directories(run);
  std::ofstream(run / "config.yaml") << "# resolved from demo.yaml with --smoke\nexperiment: demo\n";
  {
    std::ofstream out(run / "results.jsonl");
    out << record(0, 1, around(1.0)).dump() << "\n" << record(1, 2, around(2.0)).dump() << "\n{\"experiment\": \"de";
  }
  HistoryStore store(dir / "h.sqlite");
  const auto id = store.import_run_dir(run);
  ASSERT_GT(id, 0);
  EXPECT_EQ(store.import_run_dir(run), 0);  // already there
  EXPECT_EQ(store.records(id).size(), 2u);
  const auto info = store.run(id);
  EXPECT_TRUE(info->smoke);
  EXPECT_EQ(info->experiment, "demo");
  EXPECT_EQ(info->status, "ok");
}

TEST(HistoryStore, LastGoodSkipsFailedUnfinishedAndRegressedRuns) {
  const auto dir = fresh_dir("store-last-good");
  HistoryStore store(dir / "h.sqlite");
  auto add = [&](const std::string& started, const std::string& status, bool finish) {
    const auto id = store.begin_run("demo", {}, env_json(), false, started);
    store.add_point(id, stored({record(0, 1, around(1.0), 1e6, status)}));
    if (finish) store.finish_run(id);
    return id;
  };
  const auto good = add("2026-11-01T00:00:00Z", "ok", true);
  add("2026-11-02T00:00:00Z", "error", true);
  const auto regressed = add("2026-11-03T00:00:00Z", "ok", true);
  store.set_verdict(regressed, "regression");
  add("2026-11-04T00:00:00Z", "ok", false);
  RunFilter f;
  f.experiment = "demo";
  f.good_only = true;
  auto runs = store.runs(f);
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs.front().id, good);
  f.good_only = false;
  f.finished_only = true;
  EXPECT_EQ(store.runs(f).size(), 3u);
  f.since = "2026-11-02";
  EXPECT_EQ(store.runs(f).size(), 2u);
}

}  // namespace
}  // namespace runner::history
