// Ctrl-C and SIGTERM during a sweep: the point in flight is recorded as
// `interrupted`, log.txt says so, children registered by plugins (ChildProcessGuard)
// are ended, and the process exits with 130 (SIGINT) or 143.
//
// The signals are blocked in every thread and taken by one watcher thread with
// sigwait, so the handler may lock mutexes and write files (nothing runs in
// signal context). The run loop names what to do for the point in flight.
#pragma once
#include <functional>
#include <mutex>

namespace runner {

class InterruptGuard {
 public:
  // Blocks SIGINT/SIGTERM for this thread (and threads it creates later) and starts the watcher.
  InterruptGuard();
  // Stops the watcher and restores the signal mask.
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // What to write when a signal arrives (called on the watcher thread with
  // `mutex()` held, then the process exits). Set before each point; empty = nothing.
  void on_interrupt(std::function<void(const char* signal_name)> write_note);
  // Held by the run loop while it writes records, so a signal never interleaves.
  std::mutex& mutex() { return mutex_; }

 private:
  std::mutex mutex_;
  std::function<void(const char*)> write_note_;
  struct Watcher;
  Watcher* watcher_;
};

}  // namespace runner
