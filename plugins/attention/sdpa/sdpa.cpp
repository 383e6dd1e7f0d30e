// attention/sdpa: LibTorch's at::scaled_dot_product_attention (fused flash, memory-efficient
// or cuDNN kernels where they apply, else the math fallback). mechanism() names the
// backend the dispatcher chose for the last call.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/scaled_dot_product_attention.h>

#include "runner/attention.hpp"
#include "runner/outcome.hpp"
#include "runner/range.hpp"

namespace {

std::string backend_name(std::int64_t choice) {
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::flash_attention: return "flash";
    case at::SDPBackend::efficient_attention: return "memory-efficient";
    case at::SDPBackend::cudnn_attention: return "cuDNN";
    case at::SDPBackend::overrideable: return "overrideable";
    default: return "none";
  }
}

// Enables only the requested backend for one call ("auto" leaves the global flags alone).
class BackendScope {
 public:
  explicit BackendScope(const std::string& backend) : active_(backend != "auto") {
    if (!active_) return;
    auto& c = at::globalContext();
    saved_ = {c.userEnabledFlashSDP(), c.userEnabledMemEfficientSDP(), c.userEnabledCuDNNSDP(), c.userEnabledMathSDP()};
    c.setSDPUseFlash(backend == "flash");
    c.setSDPUseMemEfficient(backend == "efficient");
    c.setSDPUseCuDNN(backend == "cudnn");
    c.setSDPUseMath(backend == "math");
  }
  ~BackendScope() {
    if (!active_) return;
    auto& c = at::globalContext();
    c.setSDPUseFlash(saved_[0]);
    c.setSDPUseMemEfficient(saved_[1]);
    c.setSDPUseCuDNN(saved_[2]);
    c.setSDPUseMath(saved_[3]);
  }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  bool active_;
  std::array<bool, 4> saved_{};
};

class SdpaAttention : public runner::Attention {
 public:
  explicit SdpaAttention(std::string backend) : backend_(std::move(backend)) {}
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override {
    if (mask.kind == runner::AttentionMask::Kind::sliding_window)
      throw runner::SkipPoint("attention/sdpa: a sliding-window mask is not run here (is_causal covers none and "
                              "causal); use attention/naive or attention/flash");
    const bool is_causal = mask.hides_future();
    runner::ScopedRange range("attention/sdpa");
    BackendScope scope(backend_);
    // The fused CUDA backends take [batch, heads, seq, d] only and fall back to the math
    // kernel for anything else: give inputs without a head dimension a single head.
    const std::int64_t missing = std::max<std::int64_t>(0, 4 - q.dim());
    auto to4 = [&](const torch::Tensor& t) {
      torch::Tensor r = t;
      for (std::int64_t i = 0; i < missing; ++i) r = r.unsqueeze(-3);
      return r;
    };
    const torch::Tensor q4 = to4(q), k4 = to4(k), v4 = to4(v);
    if (!chosen_) chosen_ = backend_name(at::_fused_sdp_choice(q4, k4, v4, {}, 0.0, is_causal));
    torch::Tensor out = at::scaled_dot_product_attention(q4, k4, v4, {}, 0.0, is_causal);
    for (std::int64_t i = 0; i < missing; ++i) out = out.squeeze(-3);
    return out;
  }
  std::string mechanism() const override { return "at::scaled_dot_product_attention, " + chosen_.value_or("?") + " backend"; }

 private:
  std::string backend_;
  std::optional<std::string> chosen_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "sdpa";
  m.version = "1";
  m.description = "LibTorch's fused at::scaled_dot_product_attention; records the backend it ran";
  m.options = {runner::opt_enum("backend", {"auto", "flash", "efficient", "cudnn", "math"}, "auto",
                               "restrict the dispatcher to one backend (auto: its own choice)")};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<SdpaAttention>(p.text("backend"));
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
