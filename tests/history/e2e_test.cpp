// The runner binary end to end with the history: runs record themselves,
// compare flags an injected slowdown (exit 1) and not an unchanged rerun,
// history queries resolve, a killed run keeps whole points, and a scheduled
// sweep (crontab path) appends one verdict line per run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "history/store.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::fresh_dir;
using testing::read_text;

struct Result {
  int code;
  std::string output;
};

// The echo plugin comes from RUNNER_PLUGIN_PATH unless `plugin_env` is false.
Result sh(const std::filesystem::path& dir, const std::string& args, const std::string& env = "",
          bool plugin_env = true) {
  static int n = 0;
  const auto log = dir / ("cmd-" + std::to_string(n++) + ".txt");
  const std::string plugins = plugin_env ? "RUNNER_PLUGIN_PATH=" RUNNER_ECHO_PLUGIN_DIR " " : "";
  const std::string cmd = "cd " + dir.string() + " && " + env + plugins + "RUNNER_HISTORY=" +
                          (dir / "history.sqlite").string() + " " RUNNER_EXE " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(log)};
}

// Two points; each step sleeps sleep_us, 15 measured steps give the U test
// enough repetitions.
const char* kExperiment = R"(experiment: sleepy
measure: {warmup_steps: 2, measured_steps: 15}
task: echo
params: {sleep_us: 2000}
sweep:
  value: [1.0, 2.0]
)";

// The history verbs never need LibTorch: a copy of the front-end alone (no
// runner-torch beside it) answers them, and refuses other commands with a message
// that names what is missing; in the build, other commands reach runner-torch.
TEST(HistoryEndToEnd, TheFrontEndAnswersHistoryVerbsWithoutTheLibTorchHost) {
  const auto dir = fresh_dir("e2e-front-end");
  std::filesystem::create_directories(dir / "alone");
  std::filesystem::copy_file(RUNNER_EXE, dir / "alone" / "runner");
  const auto run = [&](const std::string& exe, const std::string& args) {
    const auto log = dir / "out.txt";
    const int status = std::system((exe + " " + args + " > " + log.string() + " 2>&1").c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(log)};
  };
  const std::string alone = (dir / "alone" / "runner").string();
  const Result help = run(alone, "compare --help");
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_NE(help.output.find("usage: runner compare A B"), std::string::npos) << help.output;
  const Result history = run("RUNNER_HISTORY=" + (dir / "h.sqlite").string() + " " + alone, "history --import " +
                             dir.string());
  EXPECT_EQ(history.code, 2) << history.output;  // no run directories there: a clear error, not a crash
  EXPECT_NE(history.output.find("no run directory (one with results.jsonl) under"), std::string::npos) << history.output;
  const Result version = run(alone, "--version");
  EXPECT_EQ(version.code, 127) << version.output;
  EXPECT_NE(version.output.find("cannot find runner-torch"), std::string::npos) << version.output;
  const Result built = run(RUNNER_EXE, "--version");
  EXPECT_EQ(built.code, 0) << built.output;
  EXPECT_NE(built.output.find("libtorch="), std::string::npos) << built.output;
}

TEST(HistoryEndToEnd, CompareFlagsAnInjectedSlowdownAndNotAnUnchangedRerun) {
  const auto dir = fresh_dir("e2e-compare");
  std::ofstream(dir / "sleepy.yaml") << kExperiment;
  ASSERT_EQ(sh(dir, "sleepy.yaml --device cpu --out base").code, 0);
  ASSERT_EQ(sh(dir, "sleepy.yaml --device cpu --out rerun").code, 0);
  ASSERT_EQ(sh(dir, "sleepy.yaml --device cpu --out slow --set params.sleep_us=10000").code, 0);

  // A loaded 2-core CI machine stretches 2 ms sleeps by tens of percent between
  // runs: the threshold says so; the slowdown below is 5x.
  const Result same = sh(dir, "compare base rerun --threshold 0.5");
  EXPECT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("no regression"), std::string::npos) << same.output;

  // The --set changed a parameter: no point in common is an error, not a pass;
  // --ignore-param says that is the A/B knob.
  const Result unmatched = sh(dir, "compare base slow --threshold 0.3");
  EXPECT_EQ(unmatched.code, 2) << unmatched.output;
  EXPECT_NE(unmatched.output.find("nothing comparable: "), std::string::npos) << unmatched.output;
  EXPECT_NE(unmatched.output.find("A's points (main sleep_us=2000 value=1.0 item=a, ...)"), std::string::npos)
      << unmatched.output;
  const Result slow = sh(dir, "compare base slow --threshold 0.3 --format json --metric sleep_ms --ignore-param sleep_us");
  EXPECT_EQ(slow.code, 1) << slow.output;
  const auto j = nlohmann::json::parse(slow.output);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["verdict"], "slower") << row.dump();
    EXPECT_GT(row["ratio"].get<double>(), 1.5);
    EXPECT_LT(row["p_value"].get<double>(), 0.05);
  }

  // History queries: the newest good run before `slow` is `rerun`.
  const Result query = sh(dir, "compare last-good slow --threshold 0.3 --format markdown --ignore-param sleep_us");
  EXPECT_EQ(query.code, 1) << query.output;
  EXPECT_NE(query.output.find("### runner compare: **regression**"), std::string::npos) << query.output;
  EXPECT_NE(query.output.find("- A: run 2 ("), std::string::npos) << query.output;  // rerun, the newest good run

  const Result listing = sh(dir, "history --experiment sleepy");
  EXPECT_EQ(listing.code, 0);
  EXPECT_NE(listing.output.find("/slow"), std::string::npos) << listing.output;
  EXPECT_EQ(sh(dir, "history --since nonsense").code, 2);
  EXPECT_EQ(sh(dir, "compare base nowhere").code, 2);
}

TEST(HistoryEndToEnd, AKilledRunKeepsWholePointsAndIsListedAsKilledThenResumeCompletesIt) {
  const auto dir = fresh_dir("e2e-killed");
  std::ofstream(dir / "many.yaml") << "experiment: many\nmeasure: {warmup_steps: 0, measured_steps: 1}\ntask: echo\n"
                                      "params: {sleep_us: 20000, labels: [a, b, c]}\nsweep:\n  value: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]\n";
  const std::string cmd = "cd " + dir.string() + " && RUNNER_PLUGIN_PATH=" RUNNER_ECHO_PLUGIN_DIR " RUNNER_HISTORY=" +
                          (dir / "history.sqlite").string() + " exec " RUNNER_EXE " many.yaml --device cpu --out run";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until some points are done (start-up can take seconds on a loaded CI machine), then kill -9.
  // A point reaches the history just after results.jsonl, so wait for four points to expect three.
  for (int i = 0; i < 12000; ++i) {
    const std::string results = read_text(dir / "run" / "results.jsonl");
    if (std::count(results.begin(), results.end(), '\n') >= 12) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  HistoryStore store(dir / "history.sqlite");
  const auto runs = store.runs({});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "killed");
  const auto records = store.records(runs[0].id);
  EXPECT_GE(records.size(), 9u);
  EXPECT_LT(records.size(), 60u);
  EXPECT_EQ(records.size() % 3, 0u) << "a point was stored in part";
  const Result listing = sh(dir, "history");
  EXPECT_NE(listing.output.find("killed"), std::string::npos) << listing.output;

  // --resume continues the same history run: finished, every point once.
  const Result resumed = sh(dir, "many.yaml --device cpu --resume run");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("history disabled"), std::string::npos) << resumed.output;
  const auto after = store.runs({});
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].status, "ok");
  const auto all = store.records(after[0].id);
  EXPECT_EQ(all.size(), 60u);
  std::set<std::string> keys;
  for (const auto& r : all) keys.insert(r.key);
  EXPECT_EQ(keys.size(), 60u);
}

TEST(HistoryEndToEnd, AScheduledSweepLogsOneVerdictLinePerRunAndKeepsTheGoodBaseline) {
  const auto dir = fresh_dir("e2e-schedule");
  std::ofstream(dir / "sleepy.yaml") << kExperiment;
  const std::string env = "RUNNER_CRONTAB=" + (dir / "crontab").string() + " RUNNER_SCHEDULE_DIR=" +
                          (dir / "schedules").string() + " ";
  const std::string common = "--every 24h --cron --device cpu --log " + (dir / "regressions.log").string();
  ASSERT_EQ(sh(dir, "schedule sleepy.yaml --name nightly --threshold 0.3 " + common, env).code, 0);
  EXPECT_NE(read_text(dir / "crontab").find("schedule --run 'nightly'"), std::string::npos);

  // What cron runs each night: the first has no baseline, the second compares.
  Result first = sh(dir, "schedule --run nightly", env);
  ASSERT_EQ(first.code, 0) << first.output;
  Result second = sh(dir, "schedule --run nightly", env);
  ASSERT_EQ(second.code, 0) << second.output;
  std::string log = read_text(dir / "regressions.log");
  ASSERT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
  EXPECT_NE(log.find("nightly ok run 1, no baseline"), std::string::npos) << log;
  EXPECT_NE(log.find("nightly ok run 2 vs last-good = run 1"), std::string::npos) << log;

  // The code gets three times slower (the echo plugin's extra sleep stands in).
  const std::string slower = env + "RUNNER_ECHO_EXTRA_SLEEP_US=4000 ";
  Result slow = sh(dir, "schedule --run nightly", slower);
  EXPECT_EQ(slow.code, 1) << slow.output;
  // The next night still compares with the last good run, so it stays flagged.
  Result again = sh(dir, "schedule --run nightly", slower);
  EXPECT_EQ(again.code, 1) << again.output;
  log = read_text(dir / "regressions.log");
  EXPECT_NE(log.find("nightly REGRESSION run 3 vs last-good = run 2"), std::string::npos) << log;
  EXPECT_NE(log.find("nightly REGRESSION run 4 vs last-good = run 2"), std::string::npos) << log;
  EXPECT_NE(log.find("compare.md"), std::string::npos);

  const Result listing = sh(dir, "schedule --list", env);
  EXPECT_NE(listing.output.find("last: "), std::string::npos) << listing.output;
  EXPECT_NE(listing.output.find("REGRESSION run 4"), std::string::npos) << listing.output;
  EXPECT_NE(sh(dir, "history").output.find("ok,REGR"), std::string::npos);
  ASSERT_EQ(sh(dir, "schedule --remove nightly", env).code, 0);
  EXPECT_EQ(read_text(dir / "crontab").find("nightly"), std::string::npos);
}

// A schedule installed with --plugin-path fires from a shell without
// RUNNER_PLUGIN_PATH (as cron's is) and still finds the plugin; a sweep that is
// refused logs the sweep's own error and a file holding its output that exists.
TEST(HistoryEndToEnd, AScheduleCarriesItsPluginPathAndLogsTheRealErrorOfAFailedSweep) {
  const auto dir = fresh_dir("e2e-schedule-env");
  std::ofstream(dir / "sleepy.yaml") << kExperiment;
  std::ofstream(dir / "missing.yaml") << "experiment: missing\ntask: no_such_task\n";
  // No plugin path from the environment, as under cron.
  const std::string env = "env -u RUNNER_PLUGIN_PATH RUNNER_CRONTAB=" + (dir / "crontab").string() +
                          " RUNNER_SCHEDULE_DIR=" + (dir / "schedules").string() + " ";
  const std::string common = "--every 24h --cron --device cpu --log " + (dir / "regressions.log").string();
  const Result installed = sh(dir, "schedule sleepy.yaml --name withpath --plugin-path " RUNNER_ECHO_PLUGIN_DIR " " +
                                       common, env, false);
  ASSERT_EQ(installed.code, 0) << installed.output;
  EXPECT_NE(installed.output.find("each run gets this shell's"), std::string::npos) << installed.output;
  const Result fired = sh(dir, "schedule --run withpath", env, false);
  EXPECT_EQ(fired.code, 0) << fired.output;
  EXPECT_NE(read_text(dir / "regressions.log").find("withpath ok run 1"), std::string::npos)
      << read_text(dir / "regressions.log");

  ASSERT_EQ(sh(dir, "schedule missing.yaml --name broken " + common, env, false).code, 0);
  const Result failed = sh(dir, "schedule --run broken", env, false);
  EXPECT_EQ(failed.code, 2) << failed.output;
  const std::string log = read_text(dir / "regressions.log");
  const auto at = log.find("broken ERROR the sweep did not run (exit 2): runner: ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find("no_such_task", at), std::string::npos) << log;
  const auto in = log.find("; output in ", at);
  ASSERT_NE(in, std::string::npos) << log;
  const std::string file = log.substr(in + 12, log.find('\n', in) - in - 12);
  EXPECT_TRUE(std::filesystem::exists(file)) << file;
  EXPECT_NE(read_text(file).find("no_such_task"), std::string::npos);
}

// runner ab: three rounds a side in the order A B B A A B; a B three times
// slower is a regression over rounds (exit 1), and bad input is exit 2 with
// the reason: too few rounds, a side whose command records nothing.
TEST(HistoryEndToEnd, AbRunsBothBuildsAlternatelyAndFlagsTheSlowerOne) {
  const auto dir = fresh_dir("e2e-ab");
  std::ofstream(dir / "sleepy.yaml") << kExperiment;
  const Result slower = sh(dir, "ab sleepy.yaml --device cpu --work runs --format json --a " RUNNER_EXE
                                " --b 'env RUNNER_ECHO_EXTRA_SLEEP_US=4000 " RUNNER_EXE "'");
  ASSERT_EQ(slower.code, 1) << slower.output;
  EXPECT_NE(slower.output.find("order ABBAAB"), std::string::npos) << slower.output;
  for (const char* run : {"a-1", "a-2", "a-3", "b-1", "b-2", "b-3"})
    EXPECT_TRUE(std::filesystem::exists(dir / "runs" / run / "results.jsonl")) << run;
  EXPECT_NE(slower.output.find("t over rounds\""), std::string::npos) << slower.output;  // moderated with 3+ points
  EXPECT_NE(slower.output.find("\"verdict\": \"slower\""), std::string::npos) << slower.output;
  const Result few = sh(dir, "ab sleepy.yaml --rounds 2 --a " RUNNER_EXE " --b " RUNNER_EXE);
  EXPECT_EQ(few.code, 2);
  EXPECT_NE(few.output.find("--rounds 2: needs 3 or more"), std::string::npos) << few.output;
  const Result broken = sh(dir, "ab sleepy.yaml --device cpu --work broken --a " RUNNER_EXE " --b false");
  EXPECT_EQ(broken.code, 2);
  EXPECT_NE(broken.output.find("B round 1 recorded nothing"), std::string::npos) << broken.output;
}

// A script moved (bench/ -> pytorch/) splits a point's history at the rename: the
// runs before and after share no point. `runner history --rekey` joins them again.
TEST(HistoryEndToEnd, RekeyJoinsAPointsHistoryAcrossAMovedScript) {
  const auto dir = fresh_dir("e2e-rekey");
  {
    HistoryStore store(dir / "history.sqlite");
    for (const std::string script : {"bench/train.py", "pytorch/train.py"}) {
      nlohmann::json j = testing::record(0, 64, testing::around(1.0));
      j["params"]["script"] = script;
      const auto id = store.begin_run("demo", dir / script, testing::env_json(), false);
      store.add_point(id, testing::stored({j}));
      store.finish_run(id);
    }
  }
  const std::string rekey = "history --rekey script --experiment demo --from bench/ --to pytorch/";
  const Result split = sh(dir, "compare run:1 run:2");
  EXPECT_EQ(split.code, 2);
  EXPECT_NE(split.output.find("nothing comparable"), std::string::npos) << split.output;
  const Result dry = sh(dir, rekey + " --dry-run --merge");
  EXPECT_EQ(dry.code, 0) << dry.output;
  EXPECT_EQ(dry.output, "would rekey 1 record(s) (1 point(s) in 1 run(s)) of experiment demo: script bench/ -> pytorch/\n");
  const Result refused = sh(dir, rekey);  // run 2 already holds the point under pytorch/
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << refused.output;
  EXPECT_NE(refused.output.find("add --merge"), std::string::npos) << refused.output;
  const Result incomplete = sh(dir, "history --rekey script --experiment demo --from bench/");
  EXPECT_EQ(incomplete.code, 2);
  EXPECT_NE(incomplete.output.find("give --experiment X, --from OLD and --to NEW"), std::string::npos);
  const Result done = sh(dir, rekey + " --merge");
  EXPECT_EQ(done.code, 0) << done.output;
  EXPECT_NE(done.output.find("rekeyed 1 record(s)"), std::string::npos) << done.output;
  const Result joined = sh(dir, "compare run:1 run:2");
  EXPECT_EQ(joined.code, 0) << joined.output;
}

}  // namespace
// An imported run named with a terminal escape (clear the screen, retitle the
// window) printed it raw in `runner history`; it prints as visible text now.
TEST(HistoryEndToEnd, HistoryPrintsTerminalEscapesInNamesAsText) {
  const auto dir = fresh_dir("e2e-escapes");
  const auto run = dir / "run";
  std::filesystem::create_directories(run);
  std::ofstream(run / "config.yaml") << "experiment: evil\n";
  std::ofstream(run / "results.jsonl")
      << R"({"experiment":"evil\u001b[2Jname","part":"main","point":0,"task":"echo","status":"ok",)"
      << R"("params":{},"labels":{},"metrics":{},"env":{"device":"cpu"},"time":"2026-11-23T00:00:00Z"})" << "\n";
  ASSERT_EQ(sh(dir, "history --import " + run.string()).code, 0);
  const Result listing = sh(dir, "history");
  EXPECT_EQ(listing.output.find('\x1b'), std::string::npos) << listing.output;
  EXPECT_NE(listing.output.find("evil\\x1b[2Jname"), std::string::npos) << listing.output;
}

}  // namespace runner::history
