// The NCCL backend of the process group, in its own file: only CUDA builds with
// NCCL headers (RUNNER_WITH_NCCL) compile ProcessGroupNCCL; others get nullptr.
#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#ifdef RUNNER_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace runner {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                   int world_size, std::chrono::milliseconds timeout) {
#ifdef RUNNER_WITH_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
#else
  (void)store, (void)rank, (void)world_size, (void)timeout;
  return {};
#endif
}

}  // namespace runner
