// Child processes a plugin starts (task/external_python's PyTorch scripts). The runner
// exits at once on SIGINT/SIGTERM; a child left behind would go on holding the GPU (an
// H100 run lost a point to a 20 GiB orphan). Register each child while it runs: on an
// interrupt the host ends every registered child before it exits.
#pragma once
#include <sys/types.h>

#include <chrono>

namespace runner {

// Registers `pid` for the guard's lifetime (construct right after spawning, destroy
// after reaping it).
class ChildProcessGuard {
 public:
  explicit ChildProcessGuard(pid_t pid);
  ~ChildProcessGuard();
  ChildProcessGuard(const ChildProcessGuard&) = delete;
  ChildProcessGuard& operator=(const ChildProcessGuard&) = delete;

 private:
  pid_t pid_;
};

// SIGTERM to every registered child, then SIGKILL to those still running after `grace`;
// returns once all are gone (or after another `grace`). Called by the host's interrupt
// watcher; not from a signal handler.
void end_child_processes(std::chrono::milliseconds grace);

}  // namespace runner
