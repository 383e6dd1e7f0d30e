// ddp/bucketed: gradients live in buckets; a bucket is all-reduced as soon as its
// last gradient is ready, during backward.
//
// Layout (attach): parameters are taken in reverse order (backward produces the
// last layers' gradients first) and packed into buckets of at most
// bucket_size_mb (MiB; a larger parameter gets a bucket of its own; a dtype or
// device change starts a new bucket). Each parameter's .grad is set to a view of
// its bucket, so autograd accumulates straight into the bucket and no copy is
// made; zero_grad() zeroes the buckets and keeps the views.
//
// Protocol: a gradient is ready when autograd has accumulated it into .grad (a
// post-accumulate-grad hook). When a bucket's last gradient is ready, the bucket
// is marked ready; ready buckets are launched strictly in bucket order (as c10d's
// Reducer does), so every rank issues the same collectives in the same order even
// if hooks fire in a slightly different order. The all-reduce averages (NCCL AVG,
// or Gloo SUM after a divide) in place; since .grad are views, the result is
// already where the optimizer reads it. With reduce_dtype bf16 each bucket has a
// bf16 twin: the launch casts the bucket into it and all-reduces the twin (half the
// bytes on the wire, as PyTorch's bf16_compress_hook), and finish casts the mean back
// into the fp32 bucket after the wait. finish_gradient_synchronization()
// launches buckets whose gradients never came (unused parameters: zeros), then
// waits for every bucket (on CUDA the compute stream waits for NCCL's, the CPU
// does not block). The optimizer may step once it returns. If something replaced
// a .grad by another tensor (zero_grad(set_to_none)), the hook copies it into the
// bucket and points .grad back at the view.
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <optional>

#include "bucket_assignment.hpp"
#include "runner/ddp.hpp"

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

struct Bucket {
  torch::Tensor flat;
  torch::Tensor wire;          // bf16 twin of flat (reduce_dtype bf16), else undefined
  std::vector<size_t> params;  // indices into BucketedDdp::params_
  int pending = 0;             // gradients not yet ready this step
  bool ready = false;
  c10::intrusive_ptr<c10d::Work> work;
};

class BucketedDdp;

class GradReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  GradReadyHook(BucketedDdp* ddp, size_t index) : ddp_(ddp), index_(index) {}
  void operator()(const torch::autograd::Variable& param) override;

 private:
  BucketedDdp* ddp_;
  size_t index_;
};

class BucketedDdp : public runner::DataParallel {
 public:
  BucketedDdp(double bucket_size_mb, double first_bucket_mb, bool bf16_wire)
      : bucket_bytes_(bucket_size_mb * kBytesPerMiB), first_bucket_bytes_(first_bucket_mb * kBytesPerMiB),
        bf16_wire_(bf16_wire) {
    if (!(bucket_size_mb > 0)) throw std::invalid_argument("ddp/bucketed: bucket_size_mb must be > 0");
    if (!(first_bucket_mb >= 0))
      throw std::invalid_argument("ddp/bucketed: first_bucket_mb must be >= 0 (0: the first bucket is as large as the others)");
  }

  void attach(torch::nn::Module& module, runner::Context& ctx) override {
    runner::require_ranks(ctx, "ddp/bucketed");
    dist_ = ctx.dist;
    for (const auto& p : module.parameters())
      if (p.requires_grad()) params_.push_back(p);
    runner::broadcast_module_state(module, dist_);
    clock_.emplace(dist_, ctx.is_cuda());
    build_buckets();
    for (size_t i = 0; i < params_.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(params_[i], std::make_unique<GradReadyHook>(this, i));
  }

  ~BucketedDdp() override {
    for (auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  }

  void zero_grad(torch::nn::Module&) override {
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) b.flat.zero_();
    for (size_t i = 0; i < params_.size(); ++i) point_grad_at_view(i);
  }

  void prepare_for_backward() override {
    for (auto& b : buckets_) {
      b.pending = static_cast<int>(b.params.size());
      b.ready = false;
      b.work.reset();
    }
    next_bucket_ = 0;
  }

  void grad_ready(size_t index) {
    if (!gradient_sync()) return;
    if (!params_[index].grad().is_same(views_[index])) {
      views_[index].copy_(params_[index].grad());
      point_grad_at_view(index);
    }
    Bucket& b = buckets_[bucket_of_[index]];
    if (--b.pending == 0) b.ready = true;
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready) launch(next_bucket_++);
  }

  void finish_gradient_synchronization() override {
    if (!gradient_sync()) return;
    for (size_t i = 0; i < params_.size(); ++i)
      if (!params_[i].grad().is_same(views_[i])) {
        if (params_[i].grad().defined()) views_[i].copy_(params_[i].grad());
        point_grad_at_view(i);
      }
    while (next_bucket_ < buckets_.size()) launch(next_bucket_++);
    for (auto& b : buckets_) {
      b.work->wait();  // on CUDA: the compute stream waits for NCCL's, so the cast below follows
      if (b.wire.defined()) b.flat.copy_(b.wire);
    }
    prepare_for_backward();
  }

  runner::CommunicationStats take_communication() override { return clock_->take(); }
  void report(runner::Record& record) override {
    record.add("buckets", static_cast<double>(buckets_.size()), "count");
    record.add("collectives_per_step", static_cast<double>(buckets_.size()), "count");
  }

 private:
  void build_buckets() {
    bucket_of_.assign(params_.size(), 0);
    views_.resize(params_.size());
    for (const auto& members : ddp_bucketed::bucket_assignment(params_, bucket_bytes_, first_bucket_bytes_)) {
      Bucket b;
      std::int64_t numel = 0;
      for (size_t k : members) numel += params_[k].numel();
      b.flat = torch::zeros({numel}, params_[members.front()].options().requires_grad(false));
      std::int64_t offset = 0;
      for (size_t k : members) {
        views_[k] = b.flat.narrow(0, offset, params_[k].numel()).view(params_[k].sizes());
        offset += params_[k].numel();
        bucket_of_[k] = buckets_.size();
      }
      if (bf16_wire_ && b.flat.scalar_type() != torch::kBFloat16)
        b.wire = torch::empty({numel}, b.flat.options().dtype(torch::kBFloat16));
      b.params = members;
      buckets_.push_back(std::move(b));
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].grad().defined()) views_[i].copy_(params_[i].grad());
      point_grad_at_view(i);
    }
    prepare_for_backward();
  }

  void point_grad_at_view(size_t index) { params_[index].mutable_grad() = views_[index]; }

  void launch(size_t index) {
    Bucket& b = buckets_[index];
    const torch::Tensor& sent = b.wire.defined() ? b.wire.copy_(b.flat) : b.flat;
    b.work = runner::allreduce_mean(sent, dist_, *clock_);
  }

  double bucket_bytes_;
  double first_bucket_bytes_;
  bool bf16_wire_;
  runner::Distributed dist_;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> views_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;
  std::optional<runner::CollectiveClock> clock_;
};

void GradReadyHook::operator()(const torch::autograd::Variable&) { ddp_->grad_ready(index_); }

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Ddp;
  m.name = "bucketed";
  m.version = "1";
  m.description = "gradients as views into buckets; a bucket's async all-reduce starts when its last gradient is ready";
  m.options = {runner::opt_float("bucket_size_mb", 25.0, "largest bucket in MiB (a larger parameter gets its own)"),
               runner::opt_float("first_bucket_mb", 0.0,
                                 "limit of the first bucket (the last layers' gradients) in MiB, so its all-reduce "
                                 "starts early in backward (PyTorch's DDP: 1); 0: bucket_size_mb"),
               runner::opt_enum("reduce_dtype", {"fp32", "bf16"}, "fp32",
                                "dtype on the wire: fp32 (the gradients' own), or bf16 (each bucket cast to a bf16 "
                                "copy, all-reduced, cast back: half the bytes, bf16 rounding of the mean)")};
  // What report() adds to the train step's record.
  m.metrics = std::vector<std::string>{"buckets", "collectives_per_step"};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<BucketedDdp>(p.number("bucket_size_mb"), p.number("first_bucket_mb"),
                                         p.text("reduce_dtype") == "bf16");
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
