// How a task ends a point other than by emitting records. Any other exception
// makes the point `error`; c10::OutOfMemoryError makes it `oom`.
#pragma once
#include <stdexcept>
#include <string>

namespace runner {

// The point's configuration is one this plugin does not support (a dtype its
// kernel lacks, a size above its limit). The record gets status `skipped` with
// the message as reason; the sweep goes on and the exit code stays 0.
class SkipPoint : public std::runtime_error {
 public:
  explicit SkipPoint(const std::string& reason) : std::runtime_error(reason) {}
};

// The device is no longer usable (a sticky CUDA error such as an illegal
// address poisons the context for the rest of the process). The host records
// the point as `error` and ends the sweep; records already written stay.
class DeviceFault : public std::runtime_error {
 public:
  explicit DeviceFault(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace runner
