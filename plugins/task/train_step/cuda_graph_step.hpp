// Whole-step CUDA graph for task/train_step (option cuda_graph: true): the step's
// kernels (forward, loss, backward, optimizer) are captured once and replayed as
// one graph launch per step, which removes the per-op launch cost that dominates
// small models. Shapes are static (one batch reused), as the task already has.
//
// First run(): `eager_steps` eager steps on a side stream (they create the
// gradients' and optimizer state's memory outside the graph, and warm up cuBLAS),
// then `prepare` (zero_grad with set_to_none, so the captured backward writes fresh
// gradient buffers in the graph's pool instead of accumulating), then capture of
// `body`, then a replay. Later calls: replay only. The autocast weight cache is off
// during capture: a cache entry would outlive the captured allocation.
#pragma once
#include <functional>
#include <memory>

#include <c10/core/Device.h>

namespace plugins::train_step {

class CudaGraphStep {
 public:
  CudaGraphStep(const c10::Device& device, int eager_steps);
  ~CudaGraphStep();
  // Throws std::runtime_error with the cause when capture fails (an op that
  // synchronizes with the host, a non-capturable optimizer).
  void run(const std::function<void()>& prepare, const std::function<void()>& body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugins::train_step
