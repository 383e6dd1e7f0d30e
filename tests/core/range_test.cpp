#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runner/range.hpp"

namespace {

class Recorder : public runner::RangeListener {
 public:
  void range_push(const std::string& name) override { pushed.push_back(name); }
  void range_pop(const std::string& name) override { popped.push_back(name); }
  std::vector<std::string> pushed, popped;
};

// A CUDA backward runs on autograd's device thread: its ranges must reach the
// profilers that the host installed on its own thread.
TEST(Range, ListenersSeeRangesOpenedOnOtherThreads) {
  Recorder recorder;
  runner::add_range_listener(&recorder);
  std::thread worker([] { runner::ScopedRange range("attention/flash_backward"); });
  worker.join();
  runner::remove_range_listener(&recorder);
  EXPECT_EQ(recorder.pushed, std::vector<std::string>{"attention/flash_backward"});
  EXPECT_EQ(recorder.popped, std::vector<std::string>{"attention/flash_backward"});
}

TEST(Range, OpenRangesArePerThread) {
  runner::ScopedRange outer("measure");
  std::string worker_path;
  std::thread worker([&] {
    runner::ScopedRange inner("backward");
    worker_path = runner::current_range_path();
  });
  worker.join();
  EXPECT_EQ(worker_path, "backward");
  EXPECT_EQ(runner::current_range_path(), "measure");
}

}  // namespace
