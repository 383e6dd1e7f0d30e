// Child processes a plugin starts (task/external_python's PyTorch scripts). The runner
// exits at once on SIGINT/SIGTERM; a child left behind would go on holding the GPU (an
// H100 run lost a point to a 20 GiB orphan). Start each child with
// child_spawn_attributes (its own process group) and register it while it runs: on an
// interrupt, or when its point runs past measure.timeout_s, the host ends every
// registered child's process group (its own children too) before it goes on.
#pragma once
#include <spawn.h>
#include <sys/types.h>

#include <chrono>

namespace runner {

// Sets `attr` (initialized by the caller) so the child starts clean: an empty signal
// mask and every signal at its default disposition (the host blocks SIGINT and
// SIGTERM in its threads, and a child inheriting that ignores the SIGTERM that asks
// it to stop), and, with `own_group`, in a process group of its own, which
// end_child_processes ends as a whole.
void child_spawn_attributes(posix_spawnattr_t* attr, bool own_group);

// Registers `pid` for the guard's lifetime (construct right after spawning, destroy
// after reaping it; the destructor ends what the child left running in its group).
class ChildProcessGuard {
 public:
  explicit ChildProcessGuard(pid_t pid);
  ~ChildProcessGuard();
  ChildProcessGuard(const ChildProcessGuard&) = delete;
  ChildProcessGuard& operator=(const ChildProcessGuard&) = delete;

 private:
  pid_t pid_;
};

// SIGTERM to every registered child's process group, then SIGKILL to the groups of
// those still running after `grace`; returns once all are gone (or after another
// `grace`). Called by the host's interrupt watcher and point timeout; not from a
// signal handler.
void end_child_processes(std::chrono::milliseconds grace);

// Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER):
// a grandchild that left its process group (setsid) and outlived its parent becomes
// a child of this process instead of init's, where end_orphaned_children finds it.
void adopt_orphaned_descendants();

// SIGKILL to every child of this process that no ChildProcessGuard holds (the
// orphans adopt_orphaned_descendants brought here), and reaps them; returns how many.
// The host calls it after each point, when no child of its own is running.
int end_orphaned_children();

}  // namespace runner
