// Data-parallel strategy: wraps a module for training on ctx.dist.world_size ranks.
//
// Protocol, per training step (the task drives it; PyTorch's DDP does the same
// from its forward/backward):
//   attach(module, ctx)                once: broadcast rank 0's weights, register hooks
//   zero_grad(module)                  before backward (gradient views survive it)
//   prepare_for_backward()             before loss.backward(): resets per-step state,
//                                      as c10d's Reducer::prepare_for_backward
//   loss.backward()                    hooks may launch collectives here
//   finish_gradient_synchronization()  afterwards: every .grad holds the mean over ranks
//   optimizer.step()
// While gradient_sync() is false (NoSync), backward only accumulates locally and
// finish_gradient_synchronization() communicates nothing (gradient accumulation).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>
#include <torch/nn/module.h>

#include "runner/context.hpp"
#include "runner/record.hpp"

namespace c10d { class Work; }

namespace runner {

// Collectives measured since the last take_communication().
struct CommunicationStats {
  double collective_ms = 0;  // summed durations of the collectives (they may overlap compute)
  std::int64_t bytes = 0;    // payload bytes reduced, per rank
  int collectives = 0;
};

class DataParallel : public PluginBase {
 public:
  ~DataParallel() override;
  virtual void attach(torch::nn::Module& module, Context& ctx) = 0;
  virtual void zero_grad(torch::nn::Module& module) { module.zero_grad(/*set_to_none=*/true); }
  virtual void prepare_for_backward() {}
  virtual void finish_gradient_synchronization() = 0;
  // Valid once the step's device work finished (after a synchronize).
  virtual CommunicationStats take_communication() { return {}; }
  // Adds strategy metrics (e.g. bucket count) to the point's record.
  virtual void report(Record& record) { (void)record; }

  void set_gradient_sync(bool enabled) { gradient_sync_ = enabled; }
  bool gradient_sync() const { return gradient_sync_; }

 private:
  bool gradient_sync_ = true;
};

// Scope without gradient synchronization, like DistributedDataParallel.no_sync().
class NoSync {
 public:
  explicit NoSync(DataParallel& ddp) : ddp_(ddp), previous_(ddp.gradient_sync()) { ddp_.set_gradient_sync(false); }
  ~NoSync() { ddp_.set_gradient_sync(previous_); }
  NoSync(const NoSync&) = delete;
  NoSync& operator=(const NoSync&) = delete;

 private:
  DataParallel& ddp_;
  bool previous_;
};

// NCCL averages inside the collective (ReduceOp::AVG); Gloo has none (allreduce_mean).
inline bool backend_averages(const Distributed& dist) { return dist.backend == "nccl"; }

// Throws "<plugin>: needs 2 or more ranks ..." for a single-process context.
void require_ranks(const Context& ctx, const std::string& plugin);

// Copies rank 0's parameters and buffers to every rank (blocking).
void broadcast_module_state(torch::nn::Module& module, const Distributed& dist);

// Times collectives for take_communication(). CUDA: c10d's own timing (CUDA
// events around each NCCL kernel on its stream, Work::getDuration), switched on
// by the constructor. CPU (Gloo): launch to completion of the work's future.
class CollectiveClock {
 public:
  explicit CollectiveClock(const Distributed& dist, bool cuda);
  ~CollectiveClock();
  CollectiveClock(const CollectiveClock&) = delete;
  CollectiveClock& operator=(const CollectiveClock&) = delete;
  void launched(const c10::intrusive_ptr<c10d::Work>& work, std::int64_t bytes);
  // Call after the works completed and the device synchronized.
  CommunicationStats take();

 private:
  struct Pending;
  bool use_event_timing_ = false;
  std::vector<std::shared_ptr<Pending>> pending_;
  CommunicationStats done_;
};

// Starts the all-reduce that leaves in `tensor` its mean over the ranks: NCCL's AVG,
// or, where the backend has no AVG (Gloo), a SUM of tensor / world_size, divided
// before the collective so that the tensor holds the mean as soon as the work
// completes (no step after the wait, which an asynchronous caller could not take).
// `clock` times the collective. Every strategy reduces through this one function.
c10::intrusive_ptr<c10d::Work> allreduce_mean(const at::Tensor& tensor, const Distributed& dist,
                                              CollectiveClock& clock);

// Base of the strategies that synchronize after backward with blocking collectives
// (ddp/naive, ddp/flat): attach() keeps the trainable parameters, copies rank 0's
// state to every rank and starts the clock; a subclass only decides what to reduce.
class BlockingDataParallel : public DataParallel {
 public:
  explicit BlockingDataParallel(std::string plugin) : plugin_(std::move(plugin)) {}
  ~BlockingDataParallel() override;
  void attach(torch::nn::Module& module, Context& ctx) override;
  CommunicationStats take_communication() override;

 protected:
  // The trainable parameters, each with a .grad: one that backward left undefined (an
  // unused parameter) becomes zeros, so every rank runs the same collectives.
  const std::vector<torch::Tensor>& parameters_with_gradients();
  // All-reduces `tensor` in place to its mean over ranks and waits for it.
  void allreduce_mean(const at::Tensor& tensor);

 private:
  std::string plugin_;
  Distributed dist_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<CollectiveClock> clock_;
};

}  // namespace runner
