#include "launch.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed.hpp"
#include "stderr_line.hpp"

namespace runner {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

constexpr auto kGracePeriod = std::chrono::seconds(10);

std::string read_note(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

[[noreturn]] void exec_rank(const LaunchSpec& spec, int rank, int port, const std::string& error_dir) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  setpgid(0, 0);                     // own group: SIGTERM reaches the rank's children too
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(spec.nproc).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(spec.nproc).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("RUNNER_AGENT_STORE", "1", 1);
  setenv("RUNNER_LAUNCH_ERROR_DIR", error_dir.c_str(), 1);
  // N ranks share the cores, as torchrun arranges.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    setenv("OMP_NUM_THREADS", std::to_string(std::max(1u, cores / static_cast<unsigned>(spec.nproc))).c_str(), 1);
  }
  std::vector<std::string> args = {"runner"};
  args.insert(args.end(), spec.rank_args.begin(), spec.rank_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "runner launch: cannot start rank %d: %s\n", rank, std::strerror(errno));
  std::_Exit(127);
}

}  // namespace

int supervise_ranks(const LaunchSpec& spec) {
  // The store lives here, so no rank has to win a race for a port.
  c10d::TCPStoreOptions opts;
  opts.port = 0;
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = collective_timeout();
  // Never destroyed: the launcher _Exit()s right after supervising.
  auto* store = new c10d::TCPStore("127.0.0.1", opts);
  const int port = store->getPort();

  char error_template[] = "/tmp/runner-launch-XXXXXX";
  const std::string error_dir = mkdtemp(error_template) ? error_template : "/tmp";

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> pids(spec.nproc, -1);
  for (int rank = 0; rank < spec.nproc; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("runner launch: fork failed: ") + std::strerror(errno));
    if (pid == 0) exec_rank(spec, rank, port, error_dir);
    setpgid(pid, pid);
    pids[rank] = pid;
  }

  int live = spec.nproc;
  int failed_rank = -1, failed_status = 0;
  std::chrono::steady_clock::time_point kill_deadline{};
  bool stopping = false;
  auto stop_all = [&](int sig) {
    for (pid_t pid : pids)
      if (pid > 0) {
        kill(-pid, sig);
        kill(-pid, SIGCONT);  // a stopped rank (SIGSTOP) takes SIGTERM only once it runs
      }
  };
  while (live > 0) {
    if (g_stop_signal && !stopping) {
      write_stderr_line(std::string("runner launch: ") + strsignal(g_stop_signal) + "; stopping all ranks");
      stopping = true;
      stop_all(SIGTERM);
      kill_deadline = std::chrono::steady_clock::now() + kGracePeriod;
    }
    if (stopping && std::chrono::steady_clock::now() > kill_deadline) stop_all(SIGKILL);
    int status = 0;
    const pid_t pid = waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (int r = 0; r < spec.nproc; ++r)
      if (pids[r] == pid) rank = r;
    if (rank < 0) continue;
    pids[rank] = -1;
    --live;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failed_rank < 0 && !stopping) {
      failed_rank = rank;
      failed_status = status;
      std::string note = read_note(std::filesystem::path(error_dir) / ("rank" + std::to_string(rank) + ".txt"));
      write_stderr_line("runner launch: rank " + std::to_string(rank) + " " + describe(status) +
                        (note.empty() ? std::string(" (it left no error message; see its output above)") : ": " + note) +
                        "; stopping the other ranks");
      stopping = true;
      stop_all(SIGTERM);
      kill_deadline = std::chrono::steady_clock::now() + kGracePeriod;
    }
  }
  // POSIX, not std::filesystem::remove_all: libtorch.so exports an incompatible copy
  // of that symbol, which the dynamic linker may bind here (it crashed).
  for (int r = 0; r < spec.nproc; ++r) unlink((error_dir + "/rank" + std::to_string(r) + ".txt").c_str());
  rmdir(error_dir.c_str());
  if (failed_rank >= 0) return exit_code_of(failed_status);
  if (g_stop_signal) return 128 + g_stop_signal;
  return 0;
}

}  // namespace runner
