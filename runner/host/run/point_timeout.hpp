// A point's time limit (measure.timeout_s). Past it, the watchdog ends the point's
// child processes (their process groups: SIGTERM, then SIGKILL), which returns a
// task that waits on a script; the host then records the point as `timeout`. A task
// still running `grace` after that (a loop in plugin code, which no other thread can
// stop) gets `on_stuck`, which records the point and ends the run.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace runner {

class PointTimeout {
 public:
  PointTimeout(double seconds, std::chrono::milliseconds grace, std::function<void()> on_stuck);
  // Cancels the watchdog (the point returned).
  ~PointTimeout();
  PointTimeout(const PointTimeout&) = delete;
  PointTimeout& operator=(const PointTimeout&) = delete;
  // The point ran past its limit (its children were stopped).
  bool expired() const { return expired_; }

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

// How long a point past its limit may take to return once its children are gone:
// the limit itself, between half a second and five.
std::chrono::milliseconds point_timeout_grace(double timeout_s);

}  // namespace runner
