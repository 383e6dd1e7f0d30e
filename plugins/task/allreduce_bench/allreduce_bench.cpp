// All-reduce benchmark (distributed_communication_single_node): one float32
// tensor of size_mb MB (10^6 bytes) summed over all ranks of the run, with Gloo
// on CPU tensors or NCCL on the rank's GPU. Each step is one all-reduce, timed
// on its rank (CUDA events around the collective, which the compute stream waits
// for; a steady clock for Gloo) after warm-up steps; the host keeps every rank's
// record and reports the slowest rank's time.
//
//   algbw = bytes / time          busbw = algbw * 2 (n - 1) / n
// busbw is what a ring all-reduce moves over each link, so it compares across
// process counts (the nccl-tests convention).
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include "runner/measure.hpp"
#include "runner/task.hpp"

namespace {

constexpr double kBytesPerMB = 1e6;

class AllreduceBench : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    if (!ctx.dist.active() || !ctx.dist.group)
      throw std::invalid_argument("allreduce_bench: needs 2 or more ranks; start with `runner launch --nproc-per-node 2 ...`");
    const std::string backend = p.text("backend");
    if (backend == "nccl" && !ctx.is_cuda())
      throw std::invalid_argument("allreduce_bench: backend nccl needs --device cuda");
    const double size_mb = p.number("size_mb");
    const auto numel = static_cast<std::int64_t>(size_mb * kBytesPerMB / sizeof(float));
    if (numel < 1) throw std::invalid_argument("allreduce_bench: size_mb is below one float");

    // The collective's device decides the backend: CPU tensors go through Gloo.
    runner::Context timing = ctx;
    if (backend == "gloo") timing.device = c10::Device(c10::kCPU);
    torch::Tensor data = torch::rand({numel}, torch::TensorOptions().dtype(torch::kFloat32).device(timing.device));
    std::vector<at::Tensor> tensors = {data};
    auto step = [&](runner::StepTimer& t) {
      t.phase("allreduce", [&] {
        c10d::AllreduceOptions opts;
        opts.reduceOp = c10d::ReduceOp::SUM;
        ctx.dist.group->allreduce(tensors, opts)->wait();
      });
    };
    const runner::PhaseTimes times = runner::measure_steps(timing, step);
    ctx.measurements = timing.measurements;  // the host reports how measuring went

    const double bytes = static_cast<double>(numel) * sizeof(float);
    const int n = ctx.dist.world_size;
    std::vector<double> algbw, busbw;
    for (double ms : times.ms.at("allreduce")) {
      algbw.push_back(bytes / (ms * 1e-3) / 1e9);
      busbw.push_back(algbw.back() * 2.0 * (n - 1) / n);
    }
    runner::Record r;
    r.label("processes", std::to_string(n));
    r.label("impl", "runner");
    r.add("time_ms", runner::Stats::of(times.ms.at("allreduce")), "ms");
    r.add("algbw_gbps", runner::Stats::of(algbw), "GB/s");
    r.add("busbw_gbps", runner::Stats::of(busbw), "GB/s");
    r.add("bytes", bytes, "bytes");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "allreduce_bench";
  m.version = "1";
  m.description = "time and bus bandwidth of one float32 all-reduce (gloo on CPU or nccl on GPU) over the run's ranks";
  m.options = {
      runner::opt_float("size_mb", 1.0, "tensor size in MB (10^6 bytes) of float32"),
      runner::opt_enum("backend", {"gloo", "nccl"}, "gloo", "gloo: CPU tensors; nccl: the rank's GPU"),
  };
  m.metrics = std::vector<std::string>{"time_ms", "algbw_gbps", "busbw_gbps", "bytes"};
  m.labels = std::vector<std::string>{"processes", "impl"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<AllreduceBench>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
