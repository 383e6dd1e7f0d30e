#include "runner/child_process.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <mutex>
#include <set>
#include <thread>

namespace runner {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::set<pid_t>& registry() {
  static std::set<pid_t> pids;
  return pids;
}

// Reaped by us, or by the plugin's own waitpid (ECHILD), or no longer there.
bool gone(pid_t pid) {
  const pid_t r = waitpid(pid, nullptr, WNOHANG);
  if (r == pid) return true;
  if (r < 0 && errno == ECHILD) return kill(pid, 0) != 0;
  return false;
}

// Waits up to `limit` for every pid in `pending` to be gone; returns those still there.
std::set<pid_t> wait_for(std::set<pid_t> pending, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) it = gone(*it) ? pending.erase(it) : std::next(it);
    if (pending.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pending;
}

}  // namespace

ChildProcessGuard::ChildProcessGuard(pid_t pid) : pid_(pid) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(pid_);
}

ChildProcessGuard::~ChildProcessGuard() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(pid_);
}

void end_child_processes(std::chrono::milliseconds grace) {
  std::set<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    pids = registry();
  }
  if (pids.empty()) return;
  for (const pid_t pid : pids) kill(pid, SIGTERM);
  std::set<pid_t> left = wait_for(pids, grace);
  for (const pid_t pid : left) kill(pid, SIGKILL);
  wait_for(left, grace);
}

}  // namespace runner
