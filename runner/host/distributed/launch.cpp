#include "distributed/launch.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "base/stderr_line.hpp"
#include "config/validate.hpp"
#include "distributed/distributed.hpp"

namespace runner {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

constexpr auto kGracePeriod = std::chrono::seconds(10);
// Where a launcher posts its node's failure for the launchers of the other nodes.
const std::string kFailedKey = "runner/launch/failed";

std::string read_note(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// When a rank's error note was written, in ns; a rank that died without one (a signal, an
// abort) counts as the earliest: peers that lose it write notes afterwards.
std::int64_t note_time(const std::string& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) return INT64_MIN;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// How long a launcher whose rank only lost a peer waits for another node to post the cause.
constexpr auto kPeerLossWait = std::chrono::seconds(1);

// Gloo's words for a peer that went away (its process died or closed the connection).
bool lost_a_peer(const std::string& note) {
  return note.find("Connection closed by peer") != std::string::npos ||
         note.find("Connection reset by peer") != std::string::npos;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

int global_rank(const LaunchSpec& spec, int local_rank) { return spec.node_rank * spec.nproc + local_rank; }

[[noreturn]] void exec_rank(const LaunchSpec& spec, int local_rank, int port, const std::string& error_dir) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  setpgid(0, 0);                     // own group: SIGTERM reaches the rank's children too
  setenv("RANK", std::to_string(global_rank(spec, local_rank)).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(spec.nnodes * spec.nproc).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(spec.nproc).c_str(), 1);
  setenv("GROUP_RANK", std::to_string(spec.node_rank).c_str(), 1);
  setenv("GROUP_WORLD_SIZE", std::to_string(spec.nnodes).c_str(), 1);
  setenv("MASTER_ADDR", spec.master_addr.c_str(), 1);
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
  std::fprintf(stderr, "runner launch: cannot start rank %d: %s\n", global_rank(spec, local_rank), std::strerror(errno));
  std::_Exit(127);
}

// Node 0's launcher hosts the store, so no rank has to win a race for a port;
// the other nodes' launchers are its clients (to hear of a failure elsewhere).
c10d::TCPStore* connect_store(const LaunchSpec& spec) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(spec.master_port);
  opts.isServer = spec.node_rank == 0;
  opts.waitWorkers = false;
  opts.timeout = collective_timeout();
  try {
    // Never destroyed: the launcher _Exit()s right after supervising.
    return new c10d::TCPStore(spec.node_rank == 0 ? "127.0.0.1" : spec.master_addr, opts);
  } catch (const std::exception& e) {
    throw std::runtime_error("runner launch: node " + std::to_string(spec.node_rank) + ": " +
                             (spec.node_rank == 0 ? "cannot listen on port " + std::to_string(spec.master_port)
                                                  : "cannot reach node 0's launcher at " + spec.master_addr + ":" +
                                                        std::to_string(spec.master_port)) +
                             ": " + e.what());
  }
}

// A failure another node's launcher posted, else "".
std::string failure_elsewhere(c10d::TCPStore& store) {
  try {
    if (!store.check({kFailedKey})) return "";
    const std::vector<std::uint8_t> v = store.get(kFailedKey);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    return std::string("lost the store on node 0 (") + e.what() + ")";
  }
}

void post_failure(c10d::TCPStore& store, const std::string& what) {
  try {
    store.set(kFailedKey, std::vector<std::uint8_t>(what.begin(), what.end()));
  } catch (const std::exception&) {
    // Node 0 is gone; the other launchers notice that themselves.
  }
}

// Every node's ranks succeeded here: say so; node 0 keeps the store up until every
// node has said so (the other nodes' ranks still use it), or one failed.
int finish_with_other_nodes(c10d::TCPStore& store, const LaunchSpec& spec) {
  const std::string done = "runner/launch/done/";
  try {
    store.set(done + std::to_string(spec.node_rank), std::vector<std::uint8_t>{1});
  } catch (const std::exception& e) {
    write_stderr_line("runner launch: node " + std::to_string(spec.node_rank) +
                      ": this node's ranks finished, but node 0's launcher is gone (" + e.what() + ")");
    return 1;
  }
  if (spec.node_rank != 0) return 0;
  const auto deadline = std::chrono::steady_clock::now() + collective_timeout();
  for (int n = 1; n < spec.nnodes;) {
    if (store.check({done + std::to_string(n)})) {
      ++n;
      continue;
    }
    if (const std::string failure = failure_elsewhere(store); !failure.empty()) {
      write_stderr_line("runner launch: node 0: another node failed: " + failure);
      return 1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      write_stderr_line("runner launch: node 0: node " + std::to_string(n) + " did not finish within " +
                        std::to_string(collective_timeout().count() / 1000) + " s of this node's ranks");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace

void check_launch_spec(const LaunchSpec& spec) {
  if (spec.nproc < 1) throw ConfigError("--nproc-per-node: must be 1 or more, got " + std::to_string(spec.nproc));
  if (spec.nnodes < 1) throw ConfigError("--nnodes: must be 1 or more, got " + std::to_string(spec.nnodes));
  if (spec.node_rank < 0 || spec.node_rank >= spec.nnodes)
    throw ConfigError("--node-rank " + std::to_string(spec.node_rank) + ": must be in 0.." +
                      std::to_string(spec.nnodes - 1) + " for --nnodes " + std::to_string(spec.nnodes));
  if (spec.master_port < 0 || spec.master_port > 65535)
    throw ConfigError("--master-port " + std::to_string(spec.master_port) + ": not a TCP port (1..65535)");
  if (spec.nnodes > 1 && spec.master_port == 0)
    throw ConfigError("--nnodes " + std::to_string(spec.nnodes) +
                      ": every node's launcher needs the same --master-port (node 0 listens there) and "
                      "--master-addr (node 0's address)");
  if (spec.master_addr.empty()) throw ConfigError("--master-addr: empty; give node 0's host name or address");
}

int supervise_ranks(const LaunchSpec& spec) {
  check_launch_spec(spec);
  c10d::TCPStore* store = connect_store(spec);
  const int port = store->getPort();
  const std::string node = spec.nnodes > 1 ? "node " + std::to_string(spec.node_rank) + ": " : "";

  char error_template[] = "/tmp/runner-launch-XXXXXX";
  const std::string error_dir = mkdtemp(error_template) ? error_template : "/tmp";

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> pids(spec.nproc, -1);
  for (int local = 0; local < spec.nproc; ++local) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("runner launch: fork failed: ") + std::strerror(errno));
    if (pid == 0) exec_rank(spec, local, port, error_dir);
    setpgid(pid, pid);
    pids[local] = pid;
  }

  int live = spec.nproc;
  int failed_rank = -1, failed_status = 0;
  std::string failed_elsewhere;
  std::chrono::steady_clock::time_point kill_deadline{};
  bool stopping = false;
  auto stop_all = [&](int sig) {
    for (pid_t pid : pids)
      if (pid > 0) {
        kill(-pid, sig);
        kill(-pid, SIGCONT);  // a stopped rank (SIGSTOP) takes SIGTERM only once it runs
      }
  };
  auto begin_stop = [&] {
    stopping = true;
    stop_all(SIGTERM);
    kill_deadline = std::chrono::steady_clock::now() + kGracePeriod;
  };
  // The error note a local rank leaves when it fails.
  auto note_path = [&](int local) { return error_dir + "/rank" + std::to_string(global_rank(spec, local)) + ".txt"; };
  // A child that exited: its local rank (no longer live), or -1 for a process not ours.
  auto reap = [&](pid_t pid) {
    for (int r = 0; r < spec.nproc; ++r)
      if (pids[r] == pid) {
        pids[r] = -1;
        --live;
        return r;
      }
    return -1;
  };
  // With one node, waitpid blocks; with several, the store is polled between waits.
  const bool poll = spec.nnodes > 1;
  while (live > 0) {
    if (g_stop_signal && !stopping) {
      write_stderr_line("runner launch: " + node + strsignal(g_stop_signal) + "; stopping all ranks");
      if (poll) post_failure(*store, node + "its launcher got " + strsignal(g_stop_signal));  // the others stop too
      begin_stop();
    }
    if (poll && !stopping) {
      failed_elsewhere = failure_elsewhere(*store);
      if (!failed_elsewhere.empty()) {
        write_stderr_line("runner launch: " + node + "another node failed: " + failed_elsewhere +
                          "; stopping this node's ranks");
        begin_stop();
      }
    }
    if (stopping && std::chrono::steady_clock::now() > kill_deadline) stop_all(SIGKILL);
    int status = 0;
    const pid_t pid = waitpid(-1, &status, stopping || poll ? WNOHANG : 0);
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int local = reap(pid);
    if (local < 0) continue;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failed_rank < 0 && !stopping) {
      // Ranks that fail together (one dies, its peers lose their connection to it) can all be
      // gone by now, and waitpid returns them in any order: blame the earliest error note among
      // those already exited. No waiting here: the other nodes learn of this failure at once.
      std::vector<std::pair<int, int>> failed{{local, status}};
      for (int st = 0;;) {
        const pid_t other = waitpid(-1, &st, WNOHANG);
        if (other <= 0) break;
        const int r = reap(other);
        if (r >= 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) failed.emplace_back(r, st);
      }
      const auto first = std::min_element(failed.begin(), failed.end(), [&](const auto& a, const auto& b) {
        return note_time(note_path(a.first)) < note_time(note_path(b.first));
      });
      local = first->first;
      status = first->second;
      const std::string rank = std::to_string(global_rank(spec, local));
      std::string note = read_note(note_path(local));
      // A rank that only lost its connection to a peer failed because of that peer: when the
      // peer is on another node, that node's launcher posts the cause within moments.
      if (poll && lost_a_peer(note)) {
        const auto until = std::chrono::steady_clock::now() + kPeerLossWait;
        while ((failed_elsewhere = failure_elsewhere(*store)).empty() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!failed_elsewhere.empty()) {
          write_stderr_line("runner launch: " + node + "another node failed: " + failed_elsewhere +
                            " (rank " + rank + " lost its connection to it); stopping this node's ranks");
          begin_stop();
          continue;
        }
      }
      failed_rank = global_rank(spec, local);
      failed_status = status;
      const std::string what = "rank " + rank + " " + describe(status) +
                               (note.empty() ? std::string(" (it left no error message; see its output above)")
                                             : ": " + note);
      write_stderr_line("runner launch: " + node + what + "; stopping the other ranks");
      if (poll) post_failure(*store, node + what);
      begin_stop();
    }
  }
  // POSIX, not std::filesystem::remove_all: libtorch.so exports an incompatible copy
  // of that symbol, which the dynamic linker may bind here (it crashed).
  for (int r = 0; r < spec.nproc; ++r)
    unlink(note_path(r).c_str());
  rmdir(error_dir.c_str());
  if (failed_rank >= 0) return exit_code_of(failed_status);
  if (g_stop_signal) return 128 + g_stop_signal;
  if (!failed_elsewhere.empty()) return 1;
  return poll ? finish_with_other_nodes(*store, spec) : 0;
}

}  // namespace runner
