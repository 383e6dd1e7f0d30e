#include "run/point_timeout.hpp"

#include <algorithm>

#include "runner/child_process.hpp"

namespace runner {

PointTimeout::PointTimeout(double seconds, std::chrono::milliseconds grace, std::function<void()> on_stuck) {
  const auto limit = std::chrono::duration<double>(seconds);
  thread_ = std::thread([this, limit, grace, on_stuck = std::move(on_stuck)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_changed_.wait_for(lock, limit, [&] { return done_; })) return;
    expired_ = true;
    lock.unlock();
    end_child_processes(grace);
    lock.lock();
    if (done_changed_.wait_for(lock, grace, [&] { return done_; })) return;
    lock.unlock();
    on_stuck();
  });
}

PointTimeout::~PointTimeout() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  done_changed_.notify_all();
  thread_.join();
}

std::chrono::milliseconds point_timeout_grace(double timeout_s) {
  return std::chrono::milliseconds(static_cast<long long>(std::clamp(timeout_s, 0.5, 5.0) * 1000));
}

}  // namespace runner
