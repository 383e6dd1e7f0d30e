#include "runner/cuda_graph.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#ifdef RUNNER_WITH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace runner {

#ifdef RUNNER_WITH_CUDA
struct CudaGraphStep::Impl {
  c10::Device device;
  int eager_steps;
  std::string owner;
  std::unique_ptr<at::cuda::CUDAGraph> graph;

  void capture(const std::function<void()>& prepare, const std::function<void()>& body) {
    const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device.index());
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    at::cuda::CUDAEvent ready;
    ready.record(caller);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      for (int i = 0; i < eager_steps; ++i) {
        prepare();
        body();
      }
      prepare();
      // The graph allocates from its own pool, which cannot reuse blocks the eager
      // steps left cached in the default pool: hand those back to the driver first
      // (as torch.cuda.graph does), or a model that fits eagerly (2.7B bf16, H100)
      // runs out of memory while capturing. emptyCache waits for the device.
      c10::cuda::CUDACachingAllocator::emptyCache();
      const bool cache = at::autocast::is_autocast_cache_enabled();
      at::autocast::set_autocast_cache_enabled(false);
      auto g = std::make_unique<at::cuda::CUDAGraph>();
      g->capture_begin();
      auto abandon = [&] {
        try {
          g->capture_end();  // hands the allocator back to the default pool first
        } catch (...) {      // the capture is invalidated already; its end reports that again
        }
        at::autocast::set_autocast_cache_enabled(cache);
      };
      try {
        body();
      } catch (const c10::OutOfMemoryError&) {
        abandon();
        throw;  // the point is recorded as oom
      } catch (const std::exception& e) {
        abandon();
        throw std::runtime_error(owner + ": cuda_graph: capturing the step failed (" + e.what() +
                                 "); an op in the step synchronizes with the host or cannot be captured: "
                                 "set cuda_graph: false");
      }
      g->capture_end();
      at::autocast::set_autocast_cache_enabled(cache);
      graph = std::move(g);
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(caller);
  }
};

CudaGraphStep::CudaGraphStep(const c10::Device& device, int eager_steps, std::string owner)
    : impl_(std::make_unique<Impl>(Impl{device, eager_steps, std::move(owner), nullptr})) {
  if (!device.is_cuda()) throw std::invalid_argument(impl_->owner + ": cuda_graph needs a CUDA device");
}

CudaGraphStep::~CudaGraphStep() = default;

void CudaGraphStep::run(const std::function<void()>& prepare, const std::function<void()>& body) {
  if (!impl_->graph) impl_->capture(prepare, body);
  impl_->graph->replay();
}

bool CudaGraphStep::captured() const { return impl_->graph != nullptr; }
#else
struct CudaGraphStep::Impl {};

CudaGraphStep::CudaGraphStep(const c10::Device&, int, std::string owner) {
  throw std::invalid_argument(owner + ": cuda_graph needs a CUDA build of the runner");
}
CudaGraphStep::~CudaGraphStep() = default;
void CudaGraphStep::run(const std::function<void()>&, const std::function<void()>&) {}
bool CudaGraphStep::captured() const { return false; }
#endif

}  // namespace runner
