// attention/flash: our FlashAttention-2 CUDA kernels (kernels/flash_attention/) as an
// autograd function: forward saves O and L, backward runs the recomputing kernels.
#include <memory>

#include <torch/autograd.h>

#include "flash_attention.hpp"
#include "runner/attention.hpp"
#include "runner/outcome.hpp"
#include "runner/range.hpp"

namespace {

namespace flash = kernels::flash;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct FlashFunction : torch::autograd::Function<FlashFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal, int64_t family) {
    runner::ScopedRange range("attention/flash_forward");
    auto r = flash::forward(q, k, v, causal, static_cast<flash::KernelFamily>(family));
    ctx->save_for_backward({q, k, v, r.out, r.lse});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["family"] = family;
    return r.out;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    runner::ScopedRange range("attention/flash_backward");
    const auto s = ctx->get_saved_variables();
    auto g = flash::backward(s[0], s[1], s[2], s[3], grads[0], s[4], ctx->saved_data["causal"].toBool(),
                             static_cast<flash::KernelFamily>(ctx->saved_data["family"].toInt()));
    return {g.dq, g.dk, g.dv, torch::Tensor(), torch::Tensor()};
  }
};

class FlashAttention : public runner::Attention {
 public:
  explicit FlashAttention(flash::KernelFamily family) : family_(family) {}
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        bool is_causal) override {
    // A configuration the kernels are not built for is a skipped point, not an error:
    // the sweep goes on and the table says why.
    const auto dtype = q.scalar_type();
    if (q.dim() >= 1 && !flash::supports_head_dim(q.size(-1)))
      throw runner::SkipPoint("attention/flash: head dim " + std::to_string(q.size(-1)) +
                              " is not supported; the kernels are built for d in {16, 32, 64, 128}");
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
      throw runner::SkipPoint(std::string("attention/flash: dtype ") + c10::toString(dtype) +
                              " is not supported; use float32, bfloat16 or float16");
    if (family_ == flash::KernelFamily::wgmma) {
      const std::string why = flash::wgmma_unsupported_reason(q);
      if (!why.empty()) throw runner::SkipPoint("attention/flash kernel=wgmma: " + why);
    }
    // As model.attention, q/k/v are often head-split views; the kernels read dense rows.
    last_dtype_ = dtype;
    last_family_ = flash::resolve_kernel_family(family_, q);
    return FlashFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(), is_causal,
                                static_cast<int64_t>(family_));
  }
  std::string mechanism() const override {
    if (last_dtype_ == at::kFloat) return "CUDA kernels, fp32 on CUDA cores";
    return last_family_ == flash::KernelFamily::wgmma ? "CUDA kernels, wgmma m64nNk16 warpgroup tensor cores (sm_90a)"
                                                 : "CUDA kernels, mma.sync m16n8k16 tensor cores";
  }

 private:
  flash::KernelFamily family_;
  at::ScalarType last_dtype_ = at::kBFloat16;
  flash::KernelFamily last_family_ = flash::KernelFamily::mma_sync;  // what the last forward ran
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "flash";
  m.version = "1";
  m.description = "FlashAttention-2 forward and backward as our own CUDA kernels (fp32, bf16, fp16; d 16..128)";
  m.options = {runner::opt_enum("kernel", {"auto", "mma_sync", "wgmma"}, "auto",
                                "tensor-core kernels for bf16/fp16: mma_sync (any head dim), wgmma (sm_90, d 64 and "
                                "128; other points are skipped), auto (wgmma where it runs, else mma_sync)")};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<FlashAttention>(flash::parse_kernel_family(p.text("kernel")));
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
