// One attention call of an attention plugin on random q, k, v, timed forward and
// backward (pytorch_attention, torch_compile, flash_forward/backward, flash_benchmarking).
//
//   q, k, v: [batch, heads, seq, d_head] (heads 0: [batch, seq, d_head]) in `dtype`,
//   drawn once per point; dO random. Step = forward, then backward of out with dO.
//   execution eager:      phases forward, backward (step = forward + backward)
//   execution cuda_graph: the forward (no grad) and the forward+backward are each
//                         captured once into a CUDA graph and replayed; phases forward,
//                         forward_backward. Removes launch overhead, like torch.compile's
//                         reduce-overhead mode.
// Records: *_ms (stats), TFLOP/s from the medians with the FlashAttention convention
// (forward 4*b*h*s^2*d, halved when causal, the visible pairs under a sliding window; backward
// 2.5x), memory in use before backward (eager), peak memory, the mechanism that ran (attention->mechanism()), and
// the analytic memory of the naive algorithm for the same shape (analytic_* metrics),
// and with check_against_naive the relative errors against attention/naive in fp32.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention_mask.hpp"
#include "flash_attention.hpp"
#include "runner/attention.hpp"
#include "runner/device.hpp"
#include "runner/measure.hpp"
#include "runner/task.hpp"

namespace {

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  return at::kHalf;
}

struct Shape {
  std::int64_t batch, heads, seq, d;
  std::vector<std::int64_t> sizes() const {
    if (heads == 0) return {batch, seq, d};
    return {batch, heads, seq, d};
  }
  std::int64_t batch_heads() const { return batch * std::max<std::int64_t>(heads, 1); }
};

// What the naive algorithm (scores, softmax, weighted sum in `elt`-byte floats) holds:
//   saved for backward: q, k, v and the softmax output P (bh * s^2), plus out;
//   peak in backward:   saved + dO + dP and dS (two more bh * s^2) + dq, dk, dv.
//   peak in forward:    q, k, v + three bh * s^2 matrices (unscaled scores, scaled scores
//                       and the softmax output are alive together).
struct NaiveMemory {
  double attention_matrix, saved, forward_peak, backward_peak;
};
NaiveMemory naive_memory(const Shape& s, double elt) {
  const double matrix = static_cast<double>(s.batch_heads()) * static_cast<double>(s.seq) * static_cast<double>(s.seq) * elt;
  const double vec = static_cast<double>(s.batch_heads()) * static_cast<double>(s.seq) * static_cast<double>(s.d) * elt;
  const double saved = 4 * vec + matrix;
  return {matrix, saved, 3 * vec + 3 * matrix, saved + vec + 2 * matrix + 3 * vec};
}

void add_bytes(runner::Record& r, const std::string& name, double bytes) {
  r.add(name + "_bytes", bytes, "bytes");
  r.add(name + "_gib", bytes / (1024.0 * 1024.0 * 1024.0), "GiB");
}

void add_naive_memory(runner::Record& r, const NaiveMemory& naive) {
  add_bytes(r, "analytic_attention_matrix", naive.attention_matrix);
  add_bytes(r, "analytic_naive_saved", naive.saved);
  add_bytes(r, "analytic_naive_forward_peak", naive.forward_peak);
  add_bytes(r, "analytic_naive_backward_peak", naive.backward_peak);
}

class AttentionBench : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const Shape shape{p.integer("batch"), p.integer("heads"), p.integer("seq"), p.integer("d_head")};
    if (shape.batch < 1 || shape.heads < 0 || shape.seq < 1 || shape.d < 1)
      throw std::invalid_argument("attention_bench: batch, seq, d_head must be >= 1 and heads >= 0");
    const std::int64_t window = p.integer("window");
    if (window > 0 && !p.flag("causal"))
      throw std::invalid_argument("attention_bench: window " + std::to_string(window) +
                                  " is a causal sliding window; set causal: true (or window: 0)");
    const runner::AttentionMask mask = window > 0         ? runner::AttentionMask::sliding_window(window)
                                       : p.flag("causal") ? runner::AttentionMask::causal()
                                                          : runner::AttentionMask::none();
    const at::ScalarType dtype = parse_dtype(p.text("dtype"));
    const std::string execution = p.text("execution");
    const bool graphs = execution == "cuda_graph";
    if (graphs && !ctx.is_cuda()) throw std::invalid_argument("attention_bench: execution cuda_graph needs a CUDA device");
    at::globalContext().setAllowTF32CuBLAS(p.flag("allow_tf32"));
    const NaiveMemory naive = naive_memory(shape, static_cast<double>(at::elementSize(dtype)));
    if (p.flag("analytic_only")) {  // nothing is allocated: also for shapes that cannot fit
      runner::Record r;
      add_naive_memory(r, naive);
      out.emit(std::move(r));
      return;
    }

    runner::release_cached_memory(ctx.device);
    auto attention = ctx.create<runner::Attention>(runner::PluginKind::Attention, p.plugin("attention"));
    at::Generator gen = runner::seeded_generator(ctx.device, ctx.seed);
    const auto opts = at::TensorOptions().dtype(dtype).device(ctx.device);
    at::Tensor q = at::randn(shape.sizes(), gen, opts).requires_grad_(true);
    at::Tensor k = at::randn(shape.sizes(), gen, opts).requires_grad_(true);
    at::Tensor v = at::randn(shape.sizes(), gen, opts).requires_grad_(true);
    const at::Tensor dout = at::randn(shape.sizes(), gen, opts);
    auto clear_grads = [&] {
      for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
    };

    runner::Record r;
    // One untimed step first: memory in use before backward, and warm caches (masks).
    {
      ctx.synchronize();
      runner::reset_peak_memory(ctx.device);
      const auto before = runner::device_memory(ctx.device);
      at::Tensor o = attention->forward(q, k, v, mask);
      ctx.synchronize();
      const auto after_forward = runner::device_memory(ctx.device);
      o.backward(dout);
      ctx.synchronize();
      const auto after = runner::device_memory(ctx.device);
      if (before && after_forward && after) {
        add_bytes(r, "memory_before_backward", static_cast<double>(after_forward->allocated_bytes));
        add_bytes(r, "saved_by_forward", static_cast<double>(after_forward->allocated_bytes - before->allocated_bytes));
        add_bytes(r, "peak_memory", static_cast<double>(after->peak_allocated_bytes));
      }
      clear_grads();
    }

    runner::PhaseTimes times;
    if (!graphs) {
      at::Tensor o;
      times = runner::measure_steps(ctx, [&](runner::StepTimer& t) {
        t.phase("forward", [&] { o = attention->forward(q, k, v, mask); });
        t.phase("backward", [&] {
          clear_grads();
          o.backward(dout);
        });
      });
    } else {
      times = measure_graphs(ctx, *attention, q, k, v, dout, mask);
    }

    const double fwd_flops = kernels::flash::forward_flops(shape.batch_heads(), shape.seq, shape.seq, shape.d,
                                                           kernels::flash::mask_of(mask));
    auto tflops = [](double flops, double ms) { return flops / (ms * 1e-3) / 1e12; };
    for (const std::string& phase : times.order) r.add(phase + "_ms", runner::Stats::of(times.ms.at(phase)), "ms");
    const double fwd_ms = runner::Stats::of(times.ms.at("forward")).median;
    r.add("forward_tflops", tflops(fwd_flops, fwd_ms), "TFLOP/s");
    const std::string both = graphs ? "forward_backward" : "step";
    const double both_ms = runner::Stats::of(times.ms.at(both)).median;
    r.add("fwd_bwd_ms", both_ms, "ms");
    r.add("fwd_bwd_tflops", tflops(3.5 * fwd_flops, both_ms), "TFLOP/s");
    if (!graphs) {
      const double bwd_ms = runner::Stats::of(times.ms.at("backward")).median;
      r.add("backward_tflops", tflops(2.5 * fwd_flops, bwd_ms), "TFLOP/s");
    }
    add_naive_memory(r, naive);
    if (p.flag("check_against_naive")) add_errors(ctx, *attention, q, k, v, dout, mask, r);
    const std::string mechanism = attention->mechanism();
    r.add_text("mechanism", (mechanism.empty() ? p.plugin("attention").plugin_name() : mechanism) +
                                (graphs ? " + CUDA graph (whole step)" : ", eager launches"));
    out.emit(std::move(r));
  }

 private:
  // Relative errors ||x - ref|| / ||ref|| of out, dq, dk, dv against attention/naive run
  // in fp32 (TF32 off) on fp32 copies of the same inputs.
  static void add_errors(runner::Context& ctx, runner::Attention& attention, at::Tensor& q, at::Tensor& k,
                         at::Tensor& v, const at::Tensor& dout, const runner::AttentionMask& mask, runner::Record& r) {
    at::globalContext().setAllowTF32CuBLAS(false);
    auto naive = ctx.create<runner::Attention>(runner::PluginKind::Attention, runner::Params("naive"));
    for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
    const at::Tensor out = attention.forward(q, k, v, mask);
    out.backward(dout);
    auto leaf32 = [](const at::Tensor& t) { return t.detach().to(at::kFloat).requires_grad_(true); };
    at::Tensor qr = leaf32(q), kr = leaf32(k), vr = leaf32(v);
    const at::Tensor ref = naive->forward(qr, kr, vr, mask);
    ref.backward(dout.to(at::kFloat));
    auto rel = [](const at::Tensor& a, const at::Tensor& b) {
      const at::Tensor ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
      return (ad - bd).norm().item<double>() / bd.norm().item<double>();
    };
    const double errors[] = {rel(out, ref), rel(q.grad(), qr.grad()), rel(k.grad(), kr.grad()), rel(v.grad(), vr.grad())};
    const char* names[] = {"error_out", "error_dq", "error_dk", "error_dv"};
    double worst = 0;
    for (int i = 0; i < 4; ++i) {
      r.add(names[i], errors[i], "relative");
      worst = std::max(worst, errors[i]);
    }
    r.add("error_max_grad", std::max(errors[1], std::max(errors[2], errors[3])), "relative");
    r.add("error_max", worst, "relative");
    r.add("nan_in_output", torch::isnan(out).any().item<bool>() ? 1.0 : 0.0, "");
  }

  // A failure inside the capture (an OOM, say) must still end it: a stream left
  // capturing fails every later CUDA call of the process, and so every later point.
  static void capture(at::cuda::CUDAGraph& graph, const std::function<void()>& body) {
    graph.capture_begin();
    try {
      body();
    } catch (...) {
      try {
        graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    graph.capture_end();
  }

  // Captures forward (no grad) and forward+backward once each; steps replay them.
  static runner::PhaseTimes measure_graphs(runner::Context& ctx, runner::Attention& attention, at::Tensor& q,
                                           at::Tensor& k, at::Tensor& v, const at::Tensor& dout,
                                           const runner::AttentionMask& mask) {
    const c10::cuda::CUDAGuard guard(ctx.device);
    at::cuda::CUDAGraph forward_graph, step_graph;
    at::Tensor fwd_out, step_out;
    // Capture runs on a side stream (never the legacy default stream); two warm-up steps
    // there first, so lazy initialisation (cuBLAS handles, masks) stays out of the graphs.
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    side.synchronize();
    {
      const c10::cuda::CUDAStreamGuard stream_guard(side);
      for (int i = 0; i < 2; ++i) {
        for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
        attention.forward(q, k, v, mask).backward(dout);
      }
      for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
      capture(forward_graph, [&] {
        const torch::NoGradGuard no_grad;
        fwd_out = attention.forward(q, k, v, mask);
      });
      capture(step_graph, [&] {
        step_out = attention.forward(q, k, v, mask);
        step_out.backward(dout);
      });
    }
    side.synchronize();
    return runner::measure_steps(ctx, [&](runner::StepTimer& t) {
      t.phase("forward", [&] { forward_graph.replay(); });
      t.phase("forward_backward", [&] { step_graph.replay(); });
    });
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "attention_bench";
  m.version = "1";
  m.description = "forward/backward time, TFLOP/s and memory of one attention plugin on random q, k, v";
  m.options = {
      runner::opt_plugin("attention", runner::PluginKind::Attention, "naive", "the attention variant under test"),
      runner::opt_int("batch", 8, "batch size"),
      runner::opt_int("heads", 0, "heads (0: no head dimension, q is [batch, seq, d])"),
      runner::opt_int("seq", 1024, "sequence length (queries = keys)"),
      runner::opt_int("d_head", 64, "head dimension"),
      runner::opt_enum("dtype", {"fp32", "bf16", "fp16"}, "fp32", "dtype of q, k, v (no autocast)"),
      runner::opt_bool("causal", false, "causal mask (query i sees keys j <= i)"),
      runner::opt_int("window", 0, "with causal: a sliding window, query i sees keys i - window + 1 .. i; 0 = off")
          .in_range(0, 1 << 30),
      runner::opt_enum("execution", {"eager", "cuda_graph"}, "eager",
                       "eager launches, or replay of captured CUDA graphs (forward; forward+backward)"),
      runner::opt_bool("allow_tf32", false, "let cuBLAS use TF32 for fp32 matmuls"),
      runner::opt_bool("analytic_only", false,
                       "only the analytic_* memory of naive attention for this shape; nothing is allocated or run"),
      runner::opt_bool("check_against_naive", false,
                       "also record relative errors of out, dq, dk, dv against attention/naive in fp32"),
  };
  // Which points record each (a point without one is invalid): the analytic memory
  // always; timings unless analytic_only, by execution; errors with check_against_naive;
  // "?": measured memory (devices with memory stats), wall_ms (measure.sync_each_step).
  const std::string run = " if analytic_only=false", checked = " if check_against_naive=true and analytic_only=false";
  m.metrics = std::vector<std::string>{
      "forward_ms" + run, "backward_ms" + run + " and execution=eager",
      "forward_backward_ms" + run + " and execution=cuda_graph", "step_ms" + run, "wall_ms?", "forward_tflops" + run,
      "fwd_bwd_ms" + run, "fwd_bwd_tflops" + run, "backward_tflops" + run + " and execution=eager", "mechanism" + run,
      "memory_before_backward_bytes?", "memory_before_backward_gib?", "saved_by_forward_bytes?", "saved_by_forward_gib?",
      "peak_memory_bytes?", "peak_memory_gib?",
      "analytic_attention_matrix_bytes", "analytic_attention_matrix_gib", "analytic_naive_saved_bytes",
      "analytic_naive_saved_gib", "analytic_naive_forward_peak_bytes", "analytic_naive_forward_peak_gib",
      "analytic_naive_backward_peak_bytes", "analytic_naive_backward_peak_gib",
      "error_out" + checked, "error_dq" + checked, "error_dk" + checked, "error_dv" + checked,
      "error_max_grad" + checked, "error_max" + checked, "nan_in_output" + checked};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<AttentionBench>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
