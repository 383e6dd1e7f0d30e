// measure.hold_stream's machinery (CUDA builds only): holds the current CUDA
// stream behind a wait on a host flag while the measuring loop enqueues a batch
// of steps, then lets the GPU run the whole batch at once.
//
// Why: without sync_each_step a step is timed by events on the stream. When a
// step is short (a few launches, well under a millisecond) the GPU finishes each
// launch before the host has issued the next, so the host's launch gaps fall
// between the step's start and end events and count as device time. Held, the
// batch's events and kernels queue up behind the wait and run back to back once
// it is released, as nvbench's blocking kernel does.
//
// A step that makes the host wait for the stream (.item(), a synchronize, a
// cudaFree) or enqueues more work than the stream's queue takes would block
// the host while the stream waits for the host. A watchdog thread releases the
// hold when no step was enqueued for kStallBeforeRelease and counts it.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include <cuda.h>  // CUstream, CUdeviceptr and CUresult, for the driver entry point's type only

namespace runner {

// How long the host may go without enqueuing a step while a hold is armed
// before the watchdog releases it: far longer than any step that is short
// enough to need holding takes to enqueue, short enough that a step that
// synchronizes only costs a quarter of a second per batch.
constexpr std::chrono::milliseconds kStallBeforeRelease{250};

class StreamHold {
 public:
  // For the current device. Throws std::runtime_error naming measure.hold_stream
  // when the driver cannot make a stream wait on memory.
  StreamHold();
  ~StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  // Enqueues, on the current stream, a wait for the next generation of the flag.
  void arm();
  // The host enqueued another step: the watchdog's clock starts again.
  void step_enqueued();
  // Stores the armed generation into the flag (if the watchdog has not already).
  void release();
  // Holds the watchdog released, since construction.
  std::int64_t released_by_watchdog() const;

 private:
  using Clock = std::chrono::steady_clock;
  using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

  void store_locked();  // mutex_ held
  void watch();

  WaitValue32 wait_value32_ = nullptr;
  std::uint32_t* flag_ = nullptr;  // pinned, mapped host memory the GPU polls; stored through std::atomic_ref
  CUdeviceptr flag_device_ = 0;
  CUstream held_stream_ = nullptr;  // the stream armed last, synchronized before the flag is freed
  std::uint32_t generation_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool armed_ = false;
  bool stopping_ = false;
  Clock::time_point last_progress_{};
  std::int64_t released_by_watchdog_ = 0;
  std::thread watchdog_;  // started last, once everything it reads exists
};

}  // namespace runner
