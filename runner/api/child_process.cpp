#include "runner/child_process.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
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

// The child's group when it leads one (child_spawn_attributes), else the child alone.
void signal_child(pid_t pid, int signal_number) {
  if (getpgid(pid) == pid) killpg(pid, signal_number);
  else kill(pid, signal_number);
}

}  // namespace

void child_spawn_attributes(posix_spawnattr_t* attr, bool own_group) {
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(attr, &none);
  posix_spawnattr_setsigdefault(attr, &all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) {
    posix_spawnattr_setpgroup(attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(attr, flags);
}

ChildProcessGuard::ChildProcessGuard(pid_t pid) : pid_(pid) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(pid_);
}

ChildProcessGuard::~ChildProcessGuard() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(pid_);
  // Reaped by now: what it started in its group (a data loader's workers) must not
  // outlive it. No such group left: ESRCH, nothing happens.
  killpg(pid_, SIGKILL);
}

void end_child_processes(std::chrono::milliseconds grace) {
  std::set<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    pids = registry();
  }
  if (pids.empty()) return;
  for (const pid_t pid : pids) signal_child(pid, SIGTERM);
  std::set<pid_t> left = wait_for(pids, grace);
  for (const pid_t pid : left) signal_child(pid, SIGKILL);
  wait_for(left, grace);
  // The leaders are gone; what they started in their groups goes too.
  for (const pid_t pid : pids) killpg(pid, SIGKILL);
}

void adopt_orphaned_descendants() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

int end_orphaned_children() {
  std::set<pid_t> held;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    held = registry();
  }
  const pid_t self = getpid();
  std::set<pid_t> orphans;
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
    std::ifstream stat_file(std::string("/proc/") + entry->d_name + "/stat");
    std::string stat;
    std::getline(stat_file, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self &&
        !held.count(static_cast<pid_t>(pid)))
      orphans.insert(static_cast<pid_t>(pid));
  }
  closedir(proc);
  for (const pid_t pid : orphans) kill(pid, SIGKILL);
  for (const pid_t pid : orphans) waitpid(pid, nullptr, 0);
  return static_cast<int>(orphans.size());
}

}  // namespace runner
