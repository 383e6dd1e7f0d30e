#include "runner/range.hpp"

#include <algorithm>
#include <vector>

#ifdef RUNNER_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace runner {
namespace {
thread_local std::vector<RangeListener*> listeners;
thread_local std::vector<std::string> open_ranges;
}  // namespace

void add_range_listener(RangeListener* listener) { listeners.push_back(listener); }

void remove_range_listener(RangeListener* listener) {
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
  for (RangeListener* l : listeners) l->range_push(name_);
}

ScopedRange::~ScopedRange() {
  for (auto it = listeners.rbegin(); it != listeners.rend(); ++it) (*it)->range_pop(name_);
  if (!open_ranges.empty()) open_ranges.pop_back();
#ifdef RUNNER_WITH_NVTX
  nvtxRangePop();
#endif
}

}  // namespace runner
