// Sums `addend` `count` times into a 0-d tensor accumulator, the way the course's
// snippet does (s = torch.tensor(0, dtype); s += torch.tensor(0.01, dtype) in a loop),
// with real tensor ops on ctx.device so the rounding is the library's, not ours:
//   fp32_acc_fp32_add       fp32 accumulator, fp32 addends
//   fp16_acc_fp16_add       fp16 accumulator, fp16 addends
//   fp32_acc_fp16_add       fp32 accumulator, fp16 addends (in-place add promotes them)
//   fp32_acc_fp16_add_cast  fp32 accumulator, fp16 addends cast to fp32 explicitly
// The exact answer is count * addend computed in double.
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "runner/task.hpp"

namespace {

struct Variant {
  c10::ScalarType accumulator;
  c10::ScalarType addend;
  bool cast_addend_to_accumulator;
};

Variant variant_of(const std::string& name) {
  if (name == "fp32_acc_fp32_add") return {at::kFloat, at::kFloat, false};
  if (name == "fp16_acc_fp16_add") return {at::kHalf, at::kHalf, false};
  if (name == "fp32_acc_fp16_add") return {at::kFloat, at::kHalf, false};
  if (name == "fp32_acc_fp16_add_cast") return {at::kFloat, at::kHalf, true};
  throw std::invalid_argument("mixed_precision_accumulation: unknown variant '" + name + "'");
}

std::string dtype_text(c10::ScalarType t) {
  if (t == at::kFloat) return "float32";
  if (t == at::kHalf) return "float16";
  return c10::toString(t);
}

class MixedPrecisionAccumulation : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::string name = p.text("variant");
    const Variant v = variant_of(name);
    const std::int64_t count = p.integer("count");
    const double addend_value = p.number("addend");
    if (count < 1) throw std::invalid_argument("mixed_precision_accumulation: count must be >= 1");

    const auto on = at::TensorOptions().device(ctx.device);
    at::Tensor sum = at::zeros({}, on.dtype(v.accumulator));
    for (std::int64_t i = 0; i < count; ++i) {
      // A fresh addend each iteration, as in the snippet; the dtype conversion of
      // the double literal is where fp16's representation error enters.
      at::Tensor x = at::full({}, addend_value, on.dtype(v.addend));
      if (v.cast_addend_to_accumulator) x = x.to(v.accumulator);
      sum += x;
    }
    const double result = sum.item<double>();
    const double stored_addend = at::full({}, addend_value, at::TensorOptions().dtype(v.addend)).item<double>();
    const double exact = static_cast<double>(count) * addend_value;

    runner::Record r;
    r.label("variant", name);
    r.add("result", result, "");
    r.add("exact", exact, "");
    r.add("abs_error", std::abs(result - exact), "");
    r.add("rel_error", std::abs(result - exact) / std::abs(exact), "");
    r.add("stored_addend", stored_addend, "");
    r.add_text("result_dtype", dtype_text(sum.scalar_type()));
    r.add_text("accumulator_dtype", dtype_text(v.accumulator));
    r.add_text("addend_dtype", dtype_text(v.addend));
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "mixed_precision_accumulation";
  m.version = "1";
  m.description = "sum a small addend many times in fp32/fp16 accumulators and report the rounding error";
  m.options = {
      runner::opt_enum("variant", {"fp32_acc_fp32_add", "fp16_acc_fp16_add", "fp32_acc_fp16_add", "fp32_acc_fp16_add_cast"},
                       "fp32_acc_fp32_add", "accumulator and addend dtypes (see README)"),
      runner::opt_int("count", 1000, "number of additions").in_range(1, 1e9),
      runner::opt_float("addend", 0.01, "value added each time (converted to the addend dtype)"),
  };
  m.metrics = std::vector<std::string>{"result", "exact", "abs_error", "rel_error", "stored_addend", "result_dtype",
               "accumulator_dtype", "addend_dtype"};
  m.labels = std::vector<std::string>{"variant"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<MixedPrecisionAccumulation>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
