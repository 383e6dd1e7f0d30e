// Issue 28's fault injection against the host: plugins that crash, exit or hang
// while loading are named and skipped; a point whose plugin segfaults, calls
// exit()/_exit()/quick_exit() (even with 0) or throws a non-std type never makes
// a successful run, and results.jsonl and log.txt name the point; the resume
// hint can be followed as printed; a stopped rank is found in seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <fstream>
#include <thread>

#include "report/report.hpp"
#include "output/environment.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

const std::string kPluginDir = RUNNER_TEST_PLUGIN_DIR;

// An `env` for run_runner that runs it from `dir` (its plugin path exported first).
std::string from_dir(const std::string& dir) { return "; export RUNNER_PLUGIN_PATH; cd " + dir + " && "; }

std::vector<nlohmann::json> records_of(const std::filesystem::path& run) {
  return report::read_result_lines(run / "results.jsonl");
}

TEST(Faults, PluginsThatCrashExitOrHangWhileLoadingAreNamedAndSkipped) {
  const auto result = run_runner("plugins", "RUNNER_PLUGIN_PATH=" + kPluginDir + "/extra:" + kPluginDir +
                                                "/faulty RUNNER_PLUGIN_LOAD_TIMEOUT_S=1");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const std::string faulty = kPluginDir + "/faulty/";
  for (const std::string expected : {
           faulty + "faulty_constructor_segfault.so: crashed the process loading it (Segmentation fault)",
           faulty + "faulty_manifest_segfault.so: crashed the process loading it (Segmentation fault)",
           faulty + "faulty_constructor_exit.so: ended the process loading it with exit(3)",
           faulty + "faulty_constructor_hang.so: did not finish loading within 1",
           faulty + "directory.so: is a directory, not a shared library",
           faulty + "fifo.so: is not a regular file"})
    EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
  EXPECT_NE(result.output.find("test task: dies on purpose at one point"), std::string::npos) << result.output;  // the good ones still load
}

struct FaultRun {
  testing::RunnerResult result;
  std::filesystem::path dir;
  std::string log;
};

// Three points of task/fault; point 1 faults as `fault` says.
FaultRun fault_run(const std::string& name, const std::string& fault, const std::string& cwd = "") {
  const auto dir = fresh_dir("faults-" + name);
  const auto file = write_file(dir / "f.yaml", "experiment: f\nmeasure: {warmup_steps: 0, measured_steps: 1}\n"
                                               "task: fault\nparams: {at: 1, fault: " + fault + "}\n"
                                               "sweep: {point: [0, 1, 2]}\n");
  const auto result = run_runner(file.string() + " --device cpu --out " + (dir / "run").string(),
                                 cwd.empty() ? "" : from_dir(cwd));
  return {result, dir / "run", read_file(dir / "run" / "log.txt")};
}

// exit_code -1: killed by a signal (run_runner's shell may exec the runner or report 128 + signal).
void expect_point_died(const FaultRun& run, const std::string& cause, int exit_code) {
  if (exit_code == -1) EXPECT_TRUE(run.result.exit_code == -1 || run.result.exit_code == 128 + SIGSEGV) << run.result.output;
  else EXPECT_EQ(run.result.exit_code, exit_code) << run.result.output;
  const auto records = records_of(run.dir);
  ASSERT_EQ(records.size(), 2u) << run.result.output;
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[1]["point"], 1);
  EXPECT_EQ(records[1]["status"], "error");
  EXPECT_NE(records[1]["error"].get<std::string>().find(cause), std::string::npos) << records[1].dump();
  EXPECT_NE(run.log.find(" error main point=1: " + cause), std::string::npos) << run.log;
  EXPECT_NE(run.result.output.find("runner: main point=1: " + cause), std::string::npos) << run.result.output;
}

TEST(Faults, ASegfaultInAPointIsRecordedAndNamed) {
  expect_point_died(fault_run("segfault", "segfault"), "the process crashed with SIGSEGV", -1);
}

TEST(Faults, ExitZeroInAPointIsAFailedRun) {
  expect_point_died(fault_run("exit", "exit"), "plugin code called exit(0) during this point", 1);
}

TEST(Faults, UnderscoreExitAndQuickExitInAPointAreFailedRuns) {
  expect_point_died(fault_run("_exit", "_exit"), "plugin code called _exit(0) during this point", 1);
  expect_point_died(fault_run("quick_exit", "quick_exit"), "plugin code called quick_exit(0) during this point", 1);
}

TEST(Faults, NonStdThrowsFailThePointAndTheRunGoesOn) {
  for (const std::string fault : {"throw_int", "throw_struct"}) {
    const FaultRun run = fault_run(fault, fault);
    EXPECT_EQ(run.result.exit_code, 1) << run.result.output;
    const auto records = records_of(run.dir);
    ASSERT_EQ(records.size(), 3u) << run.result.output;
    EXPECT_EQ(records[1]["status"], "error");
    EXPECT_NE(records[1]["error"].get<std::string>().find("not a std::exception"), std::string::npos);
    EXPECT_EQ(records[2]["status"], "ok");
    EXPECT_NE(run.log.find("main point=1: error: threw something that is not a std::exception"), std::string::npos)
        << run.log;
  }
}

TEST(Faults, TheRecordedCommitIsTheRunnersNotTheCurrentDirectorys) {
  const auto other = fresh_dir("faults-other-repo");
  ASSERT_EQ(std::system(("cd " + other.string() + " && git init -q && git -c user.email=a@b -c user.name=t commit -q "
                         "--allow-empty -m x").c_str()), 0);
  const FaultRun run = fault_run("commit", "none", other.string());
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const auto log = fresh_dir("faults-git") / "head.txt";
  std::system(("git -C " + std::string(RUNNER_SOURCE_DIR) + " rev-parse --short=12 HEAD > " + log.string()).c_str());
  std::string head = read_file(log);
  head = head.substr(0, head.find('\n'));
  const auto env = records_of(run.dir)[0]["env"];
  const std::string recorded = env["git_commit"];
  EXPECT_EQ(recorded.substr(0, head.size()), head) << "recorded " << recorded;
  // task/fault is built in the runner's tree: the same commit.
  EXPECT_EQ(env["plugin_commits"]["task/fault"], recorded) << env.dump();
}

// A copy of the tree whose .git is stale (a build host sent the files only) names the
// commit through RUNNER_GIT_COMMIT: in-tree plugins take it too, not the stale metadata;
// a plugin built in another checkout keeps that checkout's commit.
TEST(Faults, InTreePluginsTakeTheGivenCommitOthersTheirOwn) {
  const auto other = fresh_dir("faults-plugin-repo");
  ASSERT_EQ(std::system(("cd " + other.string() + " && git init -q && git -c user.email=a@b -c user.name=t commit -q "
                         "--allow-empty -m x").c_str()), 0);
  std::ofstream(other / "task_x.so") << "not a plugin";
  const auto log = other / "head.txt";
  std::system(("git -C " + other.string() + " rev-parse --short=12 HEAD > " + log.string()).c_str());
  std::string head = read_file(log);
  head = head.substr(0, head.find('\n'));
  setenv("RUNNER_GIT_COMMIT", "feedbeef0123", 1);
  const auto commits = runner::plugin_commits({{"task/in_tree", std::filesystem::path(kPluginDir) / "task_fault.so"},
                                               {"task/x", other / "task_x.so"}});
  unsetenv("RUNNER_GIT_COMMIT");
  EXPECT_EQ(commits["task/in_tree"], "feedbeef0123") << commits.dump();
  EXPECT_EQ(commits["task/x"].get<std::string>().substr(0, head.size()), head) << commits.dump();
}

// The child's pid and its output file; the runner runs in the background.
pid_t start_runner(const std::string& args, const std::string& env, const std::filesystem::path& out) {
  const std::string cmd = env + " RUNNER_PLUGIN_PATH=" + kPluginDir + "/extra exec " + RUNNER_EXE + " " + args +
                          " > " + out.string() + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

bool wait_for_records(const std::filesystem::path& results, size_t n, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = read_file(results);
    if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;  // did not end in time
}

TEST(Faults, AHungPointStopsOnSigtermAndTheResumeHintWorksAsPrinted) {
  const auto dir = fresh_dir("faults-hang");
  const auto file = write_file(dir / "h.yaml", "experiment: h\nmeasure: {warmup_steps: 0, measured_steps: 1}\n"
                                               "task: fault\nparams: {at: 1, fault: hang}\n"
                                               "sweep: {point: [0, 1, 2]}\nsmoke: {params.status: 0}\n");
  const pid_t pid = start_runner(file.string() + " --device cpu --smoke --set 'params.status=0' --out " +
                                     (dir / "run").string(), "cd " + dir.string() + " &&", dir / "out.txt");
  ASSERT_TRUE(wait_for_records(dir / "run" / "results.jsonl", 1, std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the hanging point
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, std::chrono::seconds(20)), 143) << read_file(dir / "out.txt");
  const auto records = records_of(dir / "run");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1]["status"], "interrupted");

  const std::string log = read_file(dir / "run" / "log.txt");
  const size_t at = log.find("continue with: runner ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string hint = log.substr(at + 22, log.find('\n', at) - at - 22);
  EXPECT_NE(hint.find("--set params.status=0 --smoke --device cpu --resume "), std::string::npos) << hint;
  // As printed (from the directory the run started in), with the fault disarmed.
  const auto resumed = run_runner(hint, from_dir(dir.string()) + "RUNNER_FAULT_DISARM=1");
  EXPECT_EQ(resumed.exit_code, 0) << hint << "\n" << resumed.output;
  int finished = 0;
  for (const auto& r : records_of(dir / "run")) finished += r["status"] == "ok";
  EXPECT_EQ(finished, 3);
}

// Multi-process runs resume (launch_resume_test.cpp); a directory that is no run is
// refused by the launcher itself.
TEST(Faults, LaunchRefusesResumeOfANonRunBeforeStartingRanks) {
  const auto dir = fresh_dir("faults-launch-resume");
  const auto file = write_file(dir / "e.yaml", "experiment: e\ntask: echo\n");
  const auto result = run_runner("launch --nproc-per-node 2 " + file.string() + " --device cpu --resume " + dir.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--resume " + dir.string() + ": not a run directory (no config.yaml)"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("rank "), std::string::npos) << result.output;
}

// The pid of the rank with RANK=<rank> among the launcher's children.
pid_t rank_pid(pid_t launcher, int rank) {
  std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
  for (pid_t child; children >> child;) {
    std::ifstream environ("/proc/" + std::to_string(child) + "/environ");
    std::string entry;
    while (std::getline(environ, entry, '\0'))
      if (entry == "RANK=" + std::to_string(rank)) return child;
  }
  return -1;
}

TEST(Faults, AStoppedRankIsFoundInSecondsNotAtTheCollectiveTimeout) {
  const auto dir = fresh_dir("faults-stopped-rank");
  const auto file = write_file(dir / "s.yaml", "experiment: s\nmeasure: {warmup_steps: 0, measured_steps: 1}\n"
                                               "task: echo\nparams: {sleep_us: 100000}\n"
                                               "sweep: {value: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}\n");
  const pid_t pid = start_runner("launch --nproc-per-node 2 " + file.string() + " --device cpu --out " +
                                     (dir / "run").string(),
                                 "RUNNER_DIST_HEARTBEAT_S=2", dir / "out.txt");
  ASSERT_TRUE(wait_for_records(dir / "run" / "results.jsonl", 1, std::chrono::seconds(90))) << read_file(dir / "out.txt");
  const pid_t rank1 = rank_pid(pid, 1);
  ASSERT_GT(rank1, 0);
  kill(rank1, SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  const int code = wait_exit(pid, std::chrono::seconds(30));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  const std::string out = read_file(dir / "out.txt");
  EXPECT_EQ(code, 1) << out;
  EXPECT_LT(seconds, 20) << out;  // the collective timeout is 300 s
  EXPECT_NE(out.find("rank 0: rank 1 stopped responding (no heartbeat for 2 s"), std::string::npos) << out;
  kill(rank1, SIGKILL);  // in case the launcher did not end it
}

}  // namespace
}  // namespace runner
