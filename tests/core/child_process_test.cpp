// Children registered by plugins end with an interrupted runner (runner/child_process.hpp).
#include "runner/child_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.hpp"

extern char** environ;

namespace {

using runner::testing::fresh_dir;
using runner::testing::run_runner;
using runner::testing::write_file;

pid_t spawn_shell(const std::string& script) {
  const char* argv[] = {"sh", "-c", script.c_str(), nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawnp(&pid, "sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  return pid;
}

bool alive(pid_t pid) { return kill(pid, 0) == 0 && waitpid(pid, nullptr, WNOHANG) == 0; }

TEST(ChildProcesses, EndedWithSigtermAndSigkillWhenSigtermIsIgnored) {
  const pid_t obeys_term = spawn_shell("exec sleep 30");
  const pid_t ignores_term = spawn_shell("trap '' TERM; while :; do sleep 0.05; done");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the trap be set
  {
    const runner::ChildProcessGuard a(obeys_term), b(ignores_term);
    const auto start = std::chrono::steady_clock::now();
    runner::end_child_processes(std::chrono::milliseconds(300));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
  EXPECT_FALSE(alive(obeys_term));
  EXPECT_FALSE(alive(ignores_term));
}

TEST(ChildProcesses, AnUnregisteredChildIsLeftAlone) {
  const pid_t other = spawn_shell("exec sleep 30");
  { const runner::ChildProcessGuard registered_then_gone(other); }
  runner::end_child_processes(std::chrono::milliseconds(100));
  EXPECT_TRUE(alive(other));
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
}

// The H100 case: a timeout sent SIGTERM to the runner while a PyTorch script ran,
// and the script lived on holding 20 GiB of GPU memory. Here the script ignores SIGTERM.
TEST(ChildProcesses, AnInterruptedRunnerLeavesNoScriptBehind) {
  const auto dir = fresh_dir("child-interrupt");
  const auto pid_file = dir / "script.pid";
  const auto script = write_file(dir / "ignores_term.py",
                                 "import os, signal, sys, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "open(os.environ['SCRIPT_PID_FILE'], 'w').write(str(os.getpid()))\n"
                                 "time.sleep(120)\n");
  const auto exp = write_file(dir / "e.yaml", "experiment: ignores_sigterm\nmeasure: {warmup_steps: 0, measured_steps: 1}\n"
                                               "task: external_python\nparams: {script: " +
                                                  script.string() + "}\n");
  const auto out = dir / "run";
  // SIGTERM once the script runs (the interpreter check before it can take seconds on a
  // loaded machine), to the runner alone, as the device tool's time limit does.
  const auto log = dir / "runner.log";
  const auto r = run_runner("", "export SCRIPT_PID_FILE=" + pid_file.string() + "; " + std::string(RUNNER_EXE) +
                                    " " + exp.string() + " --device cpu --out " + out.string() + " > " + log.string() +
                                    " 2>&1 & runner=$!; for i in $(seq 1200); do [ -s " + pid_file.string() +
                                    " ] && break; sleep 0.1; done; kill -TERM $runner; wait $runner; exit $? ;");
  EXPECT_EQ(r.exit_code, 143) << r.output << runner::testing::read_file(log);
  std::ifstream in(pid_file);
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid) << "the script never started: " << runner::testing::read_file(log);
  EXPECT_NE(kill(pid, 0), 0) << "the script (pid " << pid << ") outlived the interrupted runner";
  if (kill(pid, 0) == 0) kill(pid, SIGKILL);
}

// A child's own children (a data loader's workers, `sh -c 'sleep &'`) outlived it:
// only the child was signalled. Started in its own group, it is ended as a group.
TEST(ChildProcesses, AChildsOwnChildrenAreEndedWithIt) {
  const auto dir = fresh_dir("child-group");
  const auto grandchild_pid = dir / "grandchild.pid";
  const std::string script = "sleep 60 & echo $! > " + grandchild_pid.string() + "; wait";
  const char* argv[] = {"sh", "-c", script.c_str(), nullptr};
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  runner::child_spawn_attributes(&attributes, true);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawnp(&pid, "sh", nullptr, &attributes, const_cast<char**>(argv), environ), 0);
  posix_spawnattr_destroy(&attributes);
  pid_t grandchild = 0;
  for (int i = 0; i < 200 && grandchild == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream(grandchild_pid) >> grandchild;
  }
  ASSERT_GT(grandchild, 0);
  {
    const runner::ChildProcessGuard guard(pid);
    runner::end_child_processes(std::chrono::milliseconds(500));
  }
  EXPECT_FALSE(alive(pid));
  // Not our child: once dead it waits for init, which in a container may never reap it.
  const auto dead = [](pid_t p) {
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string pid_field, name, state;
    return !(stat >> pid_field >> name >> state) || state == "Z";
  };
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = dead(grandchild);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the child's own child (pid " << grandchild << ") outlived it";
  if (!gone) kill(grandchild, SIGKILL);
}

// A plugin's child that calls setsid() leaves the process group the host ends; its
// parent gone, it outlived the run. As the reaper of its descendants' orphans, the
// host gets it as a child and ends it after the point.
TEST(ChildProcesses, AnOrphanThatLeftItsGroupIsEndedAfterThePoint) {
  runner::adopt_orphaned_descendants();
  const auto dir = fresh_dir("child-setsid");
  const auto pid_file = dir / "orphan.pid";
  const pid_t parent =
      spawn_shell("setsid sh -c 'echo $$ > " + pid_file.string() + "; exec sleep 60' > /dev/null 2>&1 &");
  waitpid(parent, nullptr, 0);
  pid_t orphan = 0;
  for (int i = 0; i < 200 && orphan == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream(pid_file) >> orphan;
  }
  ASSERT_GT(orphan, 0);
  EXPECT_NE(getpgid(orphan), getpgid(0)) << "the orphan did not leave the process group";
  EXPECT_GE(runner::end_orphaned_children(), 1);
  EXPECT_NE(kill(orphan, 0), 0) << "the orphan (pid " << orphan << ") is still running";
  if (kill(orphan, 0) == 0) kill(orphan, SIGKILL);
}

}  // namespace
