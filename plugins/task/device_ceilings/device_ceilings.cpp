// The two ceilings later reports are judged against:
//   matmul: C = A B with n x n operands; 2 n^3 FLOP per product.
//   copy:   dst.copy_(src) of `size_mib` MiB; counts bytes read + bytes written (2x size).
// Inputs are random (zeros run faster on some GPUs) and rotated over several
// buffers so a small problem does not time the cache.
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/measure.hpp"
#include "runner/task.hpp"

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

c10::ScalarType dtype_of(const std::string& name) {
  if (name == "fp32" || name == "tf32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw std::invalid_argument("device_ceilings: unknown dtype " + name);
}

// Restores the process-wide TF32 switch however the point ends.
class Tf32Switch {
 public:
  explicit Tf32Switch(bool on) : previous_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuBLAS(on);
  }
  ~Tf32Switch() { at::globalContext().setAllowTF32CuBLAS(previous_); }

 private:
  bool previous_;
};

std::vector<double> per_iteration(const std::vector<double>& step_ms, int iterations) {
  std::vector<double> out;
  for (double ms : step_ms) out.push_back(ms / iterations);
  return out;
}

class DeviceCeilings : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::string op = p.text("op");
    const std::string dtype_name = p.text("dtype");
    const auto dtype = dtype_of(dtype_name);
    const int iterations = static_cast<int>(p.integer("iterations_per_step"));
    const int buffers = static_cast<int>(p.integer("rotating_buffers"));
    if (iterations < 1 || buffers < 1) throw std::invalid_argument("iterations_per_step and rotating_buffers must be >= 1");
    const auto options = at::TensorOptions().device(ctx.device).dtype(dtype);
    Tf32Switch tf32(dtype_name == "tf32");

    runner::Record record;
    if (op == "matmul") {
      const std::int64_t n = p.integer("size");
      std::vector<at::Tensor> a, b;
      for (int i = 0; i < buffers; ++i) {
        a.push_back(at::randn({n, n}, options));
        b.push_back(at::randn({n, n}, options));
      }
      at::Tensor c = at::empty({n, n}, options);
      int k = 0;
      const auto times = runner::measure_steps(ctx, [&](runner::StepTimer& t) {
        t.phase("matmul", [&] {
          for (int i = 0; i < iterations; ++i, ++k) at::mm_out(c, a[k % buffers], b[k % buffers]);
        });
      });
      const double flop = 2.0 * static_cast<double>(n) * n * n;
      record.add("time_ms", times.stats_of(per_iteration(times.ms.at("matmul"), iterations)), "ms");
      runner::StepWork work;
      work.flop = flop * iterations;
      times.record_rates(record, work, "matmul");
      record.add("flop", flop, "FLOP");
    } else {
      const double mib = static_cast<double>(p.integer("size"));
      const std::int64_t elements = static_cast<std::int64_t>(mib * kBytesPerMiB) / at::elementSize(dtype);
      std::vector<at::Tensor> src;
      for (int i = 0; i < buffers; ++i) src.push_back(at::randn({elements}, options));
      at::Tensor dst = at::empty({elements}, options);
      int k = 0;
      const auto times = runner::measure_steps(ctx, [&](runner::StepTimer& t) {
        t.phase("copy", [&] {
          for (int i = 0; i < iterations; ++i, ++k) dst.copy_(src[k % buffers]);
        });
      });
      const double bytes_moved = 2.0 * static_cast<double>(elements) * at::elementSize(dtype);
      record.add("time_ms", times.stats_of(per_iteration(times.ms.at("copy"), iterations)), "ms");
      runner::StepWork work;
      work.bytes = bytes_moved * iterations;
      times.record_rates(record, work, "copy");
      record.add("bytes_moved", bytes_moved, "bytes");
    }
    out.emit(std::move(record));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "device_ceilings";
  m.version = "1";
  m.description = "dense matmul throughput (TFLOP/s) and memory copy bandwidth (GB/s)";
  m.options = {
      runner::opt_enum("op", {"matmul", "copy"}, "matmul", "what to measure"),
      runner::opt_enum("dtype", {"fp32", "tf32", "bf16", "fp16"}, "fp32",
                       "element type; tf32 is fp32 storage with TF32 tensor-core matmuls (CUDA only)"),
      runner::opt_int("size", 1024, "matmul: n of the n x n x n product; copy: buffer size in MiB").in_range(1, 1 << 20),
      runner::opt_int("iterations_per_step", 1, "ops per timed step (averaged); raise for tiny sizes").in_range(1, 1e6),
      runner::opt_int("rotating_buffers", 2, "input sets cycled through so caches do not flatter").in_range(1, 64),
  };
  m.metrics = std::vector<std::string>{"time_ms", "tflops if op=matmul", "flop if op=matmul", "gbps if op=copy",
                                       "bytes_moved if op=copy"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<DeviceCeilings>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
