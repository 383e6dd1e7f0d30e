// Whole-step CUDA graph: a training step's kernels (forward, loss, backward with any
// data-parallel collectives, optimizer) captured once and replayed as one graph launch
// per step, which removes the per-op launch cost that dominates small models. Shapes
// are static (one batch reused). task/train_step (option cuda_graph) and task/ddp_check
// use it.
//
// First run(): `eager_steps` eager steps on a side stream (they create the gradients'
// and optimizer state's memory outside the graph, warm up cuBLAS and, with a ddp
// strategy, create the NCCL communicators), then `prepare` (e.g. zero_grad with
// set_to_none, so the captured backward writes fresh gradient buffers in the graph's
// pool instead of accumulating), then capture of `body`, then a replay. Later calls:
// replay only. The autocast weight cache is off during capture: a cache entry would
// outlive the captured allocation.
//
// Collectives inside `body` (NCCL through c10d) are captured like kernels: NCCL's
// stream forks from the capture stream at each launch and joins it at Work::wait().
// Every rank must capture the same collectives in the same order, and a replay is a
// collective call of all ranks (NCCL's rules for captured communication). c10d's
// watchdog leaves captured work alone, so the runner's own supervision (a rank that
// dies ends the run) is what notices a lost peer during a replay.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

namespace runner {

class CudaGraphStep {
 public:
  // `owner` names the plugin in error messages ("train_step").
  CudaGraphStep(const c10::Device& device, int eager_steps, std::string owner = "cuda_graph");
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;
  // Throws std::runtime_error with the cause when capture fails (an op that
  // synchronizes with the host, a non-capturable optimizer).
  void run(const std::function<void()>& prepare, const std::function<void()>& body);
  // Whether the graph exists (the first run() captured it).
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runner
