// Liveness of the other ranks, in seconds instead of the collective timeout: a
// rank that is stopped (SIGSTOP, a debugger), frozen or gone would otherwise
// leave its peers waiting in a collective for RUNNER_DIST_TIMEOUT_S (300 s).
// Each rank bumps its counter in the rendezvous store every second and watches
// the next rank's (rank + 1 mod N, so the store sees O(N) traffic); when that
// counter has not moved for RUNNER_DIST_HEARTBEAT_S (default 10) seconds, or the
// store itself stops answering, the watcher records the point in flight as an
// error (rank 0), leaves the launcher a note naming the silent rank, aborts the
// process group and exits 1; the launcher (runner launch, torchrun, srun) then
// stops the rest. A rank that finishes says so, and is no longer watched.
#pragma once
#include <atomic>
#include <functional>
#include <thread>

#include "distributed/launch_env.hpp"

namespace runner {

class Heartbeat {
 public:
  // `on_silent_peer(why)` runs on the heartbeat thread and must not return; `why`
  // names the silent rank (or the store), not this one.
  Heartbeat(const LaunchEnv& env, std::function<void(const std::string&)> on_silent_peer);
  // Marks this rank finished and stops the thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run(LaunchEnv env, std::function<void(const std::string&)> on_silent_peer);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// RUNNER_DIST_HEARTBEAT_S, default 10; 0 turns the heartbeat off.
double heartbeat_deadline_seconds();

}  // namespace runner
