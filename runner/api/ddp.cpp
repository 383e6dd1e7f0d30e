#include "runner/ddp.hpp"

#include <chrono>
#include <mutex>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace runner {

namespace {

// Inside a CUDA graph capture a collective is recorded, not run: it has no duration
// of its own until replay, and its events are never recorded.
bool capturing() {
#ifdef RUNNER_WITH_CUDA
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  return false;
#endif
}

}  // namespace

void require_ranks(const Context& ctx, const std::string& plugin) {
  if (!ctx.dist.active() || !ctx.dist.group)
    throw std::invalid_argument(plugin + ": needs 2 or more ranks; start with `runner launch --nproc-per-node 2 ...`");
}

void broadcast_module_state(torch::nn::Module& module, const Distributed& dist) {
  if (!dist.group) return;
  torch::NoGradGuard no_grad;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  auto send = [&](const torch::Tensor& t) {
    std::vector<at::Tensor> one = {t.detach()};
    works.push_back(dist.group->broadcast(one, c10d::BroadcastOptions{}));
  };
  for (const auto& p : module.parameters()) send(p);
  for (const auto& b : module.buffers()) send(b);
  for (auto& w : works) w->wait();
}

struct CollectiveClock::Pending {
  c10::intrusive_ptr<c10d::Work> work;
  std::int64_t bytes = 0;
  std::chrono::steady_clock::time_point launched;
  std::mutex mutex;
  double cpu_ms = -1;  // set by the future's callback (Gloo)
};

CollectiveClock::CollectiveClock(const Distributed& dist, bool cuda) {
  if (!cuda || !dist.group) return;
  try {
    dist.group->getBackend(c10::DeviceType::CUDA)->enableCollectivesTiming();
    use_event_timing_ = true;
  } catch (const std::exception&) {
    use_event_timing_ = false;  // a backend without event timing (Gloo on CUDA): wall clock
  }
}

CollectiveClock::~CollectiveClock() = default;

void CollectiveClock::launched(const c10::intrusive_ptr<c10d::Work>& work, std::int64_t bytes) {
  if (use_event_timing_ && capturing()) return;
  auto p = std::make_shared<Pending>();
  p->work = work;
  p->bytes = bytes;
  p->launched = std::chrono::steady_clock::now();
  if (!use_event_timing_) {
    std::weak_ptr<Pending> weak = p;
    work->getFuture()->addCallback([weak](c10::ivalue::Future&) {
      if (auto q = weak.lock()) {
        std::lock_guard<std::mutex> lock(q->mutex);
        q->cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - q->launched).count();
      }
    });
  }
  pending_.push_back(std::move(p));
}

CommunicationStats CollectiveClock::take() {
  for (auto& p : pending_) {
    double ms = 0;
    if (use_event_timing_) {
      ms = p->work->getDuration();
    } else {
      p->work->wait();
      std::lock_guard<std::mutex> lock(p->mutex);
      ms = p->cpu_ms >= 0 ? p->cpu_ms
                          : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p->launched).count();
    }
    done_.collective_ms += ms;
    done_.bytes += p->bytes;
    done_.collectives += 1;
  }
  pending_.clear();
  CommunicationStats out = done_;
  done_ = {};
  return out;
}

BlockingDataParallel::~BlockingDataParallel() = default;

void BlockingDataParallel::attach(torch::nn::Module& module, Context& ctx) {
  require_ranks(ctx, plugin_);
  dist_ = ctx.dist;
  for (const auto& p : module.parameters())
    if (p.requires_grad()) params_.push_back(p);
  broadcast_module_state(module, dist_);
  clock_ = std::make_unique<CollectiveClock>(dist_, ctx.is_cuda());
}

CommunicationStats BlockingDataParallel::take_communication() { return clock_ ? clock_->take() : CommunicationStats{}; }

const std::vector<torch::Tensor>& BlockingDataParallel::parameters_with_gradients() {
  for (auto& p : params_)
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  return params_;
}

c10::intrusive_ptr<c10d::Work> allreduce_mean(const at::Tensor& tensor, const Distributed& dist,
                                              CollectiveClock& clock) {
  const bool avg = backend_averages(dist);
  std::vector<at::Tensor> one = {tensor};
  if (!avg) one[0].div_(dist.world_size);
  c10d::AllreduceOptions opts;
  opts.reduceOp = avg ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
  auto work = dist.group->allreduce(one, opts);
  clock.launched(work, static_cast<std::int64_t>(tensor.nbytes()));
  return work;
}

void BlockingDataParallel::allreduce_mean(const at::Tensor& tensor) {
  runner::allreduce_mean(tensor, dist_, *clock_)->wait();
}

}  // namespace runner
