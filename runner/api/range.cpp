#include "runner/range.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#ifdef RUNNER_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace runner {
namespace {
// Listeners are process-wide: ranges opened inside a CUDA backward run on autograd's
// device thread, and profilers installed by the host thread must see them too.
// Open ranges stay per thread, so each thread's nesting is its own.
std::mutex listeners_mutex;
std::vector<RangeListener*> listeners;
thread_local std::vector<std::string> open_ranges;

std::vector<RangeListener*> listeners_snapshot() {
  std::lock_guard<std::mutex> lock(listeners_mutex);
  return listeners;
}
}  // namespace

void add_range_listener(RangeListener* listener) {
  std::lock_guard<std::mutex> lock(listeners_mutex);
  listeners.push_back(listener);
}

void remove_range_listener(RangeListener* listener) {
  std::lock_guard<std::mutex> lock(listeners_mutex);
  listeners.erase(std::remove(listeners.begin(), listeners.end(), listener), listeners.end());
}

std::string current_range_path() {
  std::string path;
  for (const auto& r : open_ranges) path += (path.empty() ? "" : "/") + r;
  return path;
}

ScopedRange::ScopedRange(std::string name) : name_(std::move(name)) {
#ifdef RUNNER_WITH_NVTX
  nvtxRangePushA(name_.c_str());
#endif
  open_ranges.push_back(name_);
  for (RangeListener* l : listeners_snapshot()) l->range_push(name_);
}

ScopedRange::~ScopedRange() {
  const auto current = listeners_snapshot();
  for (auto it = current.rbegin(); it != current.rend(); ++it) (*it)->range_pop(name_);
  if (!open_ranges.empty()) open_ranges.pop_back();
#ifdef RUNNER_WITH_NVTX
  nvtxRangePop();
#endif
}

}  // namespace runner
