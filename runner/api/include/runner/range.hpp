// Named ranges: an NVTX range (visible in Nsight Systems) and a notification to
// the active profilers (the memory profiler tags allocations with the innermost
// range). Cheap enough for per-layer use.
#pragma once
#include <string>

namespace runner {

class RangeListener {
 public:
  virtual ~RangeListener();
  virtual void range_push(const std::string& name) = 0;
  virtual void range_pop(const std::string& name) = 0;
};

// Listeners are process-wide (a backward's ranges open on autograd's device thread);
// the host installs the point's profilers. Open ranges are per thread.
void add_range_listener(RangeListener* listener);
void remove_range_listener(RangeListener* listener);
// Innermost ranges joined with '/', e.g. "measure/forward/layer3/attention".
std::string current_range_path();

class ScopedRange {
 public:
  explicit ScopedRange(std::string name);
  ~ScopedRange();
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  std::string name_;
};

}  // namespace runner
