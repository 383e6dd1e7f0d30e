// cuStreamWaitValue32 comes through the runtime's driver entry point, so
// runner_api needs no link against libcuda (the driver library of the machine
// the build runs on, which a build host may lack).
#include "stream_hold.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

namespace runner {
namespace {

// The driver API version whose cuStreamWaitValue32 we call: from CUDA 12.0 on
// the symbol is the v2 memory operation (cuStreamWaitValue32_v2), which every
// CUDA 12+ driver offers; the v1 API behind CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1
// (the only "can use stream memory operations" attribute CUDA 13's cuda.h
// still names, deprecated) is not what this calls.
constexpr unsigned kDriverApiVersion = 12000;

std::runtime_error unsupported(const std::string& what) {
  return std::runtime_error("measure.hold_stream: this GPU or driver cannot make a stream wait on host memory (" + what +
                            "); drop measure.hold_stream");
}

void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw std::runtime_error(std::string("measure.hold_stream: ") + call + ": " + cudaGetErrorString(err));
}

}  // namespace

StreamHold::StreamHold() {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // Legacy-stream variant: PyTorch's default stream is the legacy null stream,
  // and every other stream is named by its handle.
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &entry, kDriverApiVersion, cudaEnableLegacyStream, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || entry == nullptr)
    throw unsupported(std::string("no cuStreamWaitValue32 entry point: ") +
                      (err != cudaSuccess ? cudaGetErrorString(err)
                       : found == cudaDriverEntryPointVersionNotSufficent ? "driver older than CUDA 12"
                                                                           : "symbol not found"));
  wait_value32_ = reinterpret_cast<WaitValue32>(entry);

  void* host = nullptr;
  check(cudaHostAlloc(&host, sizeof(std::uint32_t), cudaHostAllocMapped), "cudaHostAlloc");
  flag_ = static_cast<std::uint32_t*>(host);
  *flag_ = 0;
  void* device = nullptr;
  if (const cudaError_t e = cudaHostGetDevicePointer(&device, host, 0); e != cudaSuccess) {
    cudaFreeHost(host);
    check(e, "cudaHostGetDevicePointer");
  }
  flag_device_ = reinterpret_cast<CUdeviceptr>(device);

  // Whether the device can wait on memory at all: a wait for a value the flag
  // already holds (0 >= 0) passes at once where it is supported and is refused
  // where it is not (a virtualised GPU may refuse), before any step is queued
  // behind one. No device attribute answers this for the v2 call (see above).
  held_stream_ = c10::cuda::getCurrentCUDAStream().stream();
  const CUresult probe = wait_value32_(held_stream_, flag_device_, 0, CU_STREAM_WAIT_VALUE_GEQ);
  if (probe != CUDA_SUCCESS) {
    cudaFreeHost(host);
    throw unsupported("cuStreamWaitValue32 returned CUresult " + std::to_string(static_cast<int>(probe)));
  }
  watchdog_ = std::thread([this] { watch(); });
}

StreamHold::~StreamHold() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (armed_) store_locked();  // a step threw while the stream was held
    armed_ = false;
    stopping_ = true;
  }
  wake_.notify_one();
  watchdog_.join();
  // The GPU may not have read the last released flag yet; freeing it first would
  // leave the stream polling freed memory. Errors are ignored: a destructor runs
  // after a failed step too, when the context may already be broken.
  cudaStreamSynchronize(held_stream_);
  cudaFreeHost(flag_);
}

void StreamHold::arm() {
  const CUstream stream = c10::cuda::getCurrentCUDAStream().stream();
  // Wraps after 2^32 batches; the wait's comparison is cyclic,
  // (int32_t)(flag - value) >= 0, so the next generation still waits.
  const std::uint32_t next = generation_ + 1;
  const CUresult r = wait_value32_(stream, flag_device_, next, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("measure.hold_stream: cuStreamWaitValue32 returned CUresult " +
                             std::to_string(static_cast<int>(r)) + "; drop measure.hold_stream");
  std::lock_guard<std::mutex> lock(mutex_);
  generation_ = next;
  held_stream_ = stream;
  armed_ = true;
  last_progress_ = Clock::now();
  wake_.notify_one();
}

void StreamHold::step_enqueued() {
  // The watchdog reads the new time when its current deadline passes; no wake-up needed.
  std::lock_guard<std::mutex> lock(mutex_);
  last_progress_ = Clock::now();
}

void StreamHold::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (armed_) store_locked();
  armed_ = false;
}

std::int64_t StreamHold::released_by_watchdog() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return released_by_watchdog_;
}

void StreamHold::store_locked() {
  // Sequentially consistent (a locked exchange on x86): the store leaves the
  // CPU's write buffer at once, where the GPU's polling reads it over PCIe.
  std::atomic_ref<std::uint32_t>(*flag_).store(generation_, std::memory_order_seq_cst);
}

void StreamHold::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point deadline = last_progress_ + kStallBeforeRelease;
    if (Clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
      continue;
    }
    store_locked();
    armed_ = false;
    ++released_by_watchdog_;
  }
}

}  // namespace runner
