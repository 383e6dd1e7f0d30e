// attention/flash: our FlashAttention-2 CUDA kernels (kernels/flash_attention/) as a
// differentiable op. A model's [batch, heads, seq, d] head-split views are handed to the
// kernels as the [batch, seq, heads, d] views they are (a transpose of strides, no copy), and
// the result comes back as a view of the kernels' [batch, seq, heads * d] output.
#include <memory>

#include "attention_mask.hpp"
#include "flash_attention.hpp"
#include "runner/attention.hpp"
#include "runner/outcome.hpp"

namespace {

namespace flash = kernels::flash;

class FlashAttention : public runner::Attention {
 public:
  FlashAttention(flash::Options options, int window) : options_(options), window_(window) {}
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& caller_mask) override {
    // The window option narrows a caller's causal mask (a model's, say) to a sliding window.
    const flash::Mask mask = window_ > 0 && caller_mask.kind == runner::AttentionMask::Kind::causal
                                 ? flash::Mask::of(flash::MaskKind::sliding_window, window_)
                                 : flash::mask_of(caller_mask);
    // A configuration the kernels are not built for is a skipped point, not an error:
    // the sweep goes on and the table says why.
    const auto dtype = q.scalar_type();
    if (q.dim() >= 1 && !flash::supports_head_dim(q.size(-1)))
      throw runner::SkipPoint("attention/flash: head dim " + std::to_string(q.size(-1)) +
                              " is not supported; the kernels take multiples of 8 up to 128");
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
      throw runner::SkipPoint(std::string("attention/flash: dtype ") + c10::toString(dtype) +
                              " is not supported; use float32, bfloat16 or float16");
    if (options_.family == flash::KernelFamily::wgmma) {
      const std::string why = flash::wgmma_unsupported_reason(q);
      if (!why.empty()) throw runner::SkipPoint("attention/flash kernel=wgmma: " + why);
    }
    flash::check_inputs(q, k, v);
    last_dtype_ = dtype;
    last_family_ = flash::resolve_kernel_family(options_.family, q);
    // [..., seq, d] as [batch, seq, heads, d]: a 4-D [batch, heads, seq, d] view transposes
    // its strides; other ranks fold their leading dims into the batch.
    const bool four_d = q.dim() == 4;
    auto bshd = [four_d](const torch::Tensor& t) {
      return four_d ? t.transpose(1, 2) : t.reshape({-1, t.size(-2), t.size(-1)}).unsqueeze(2);
    };
    const torch::Tensor out = flash::attention(bshd(q), bshd(k), bshd(v), mask, options_, /*merge_heads=*/false);
    return four_d ? out.transpose(1, 2) : out.view(q.sizes());
  }
  std::string mechanism() const override {
    if (last_dtype_ == at::kFloat) return "CUDA kernels, fp32 on CUDA cores";
    return last_family_ == flash::KernelFamily::wgmma ? "CUDA kernels, wgmma m64nNk16 warpgroup tensor cores (sm_90a)"
                                                 : "CUDA kernels, mma.sync m16n8k16 tensor cores";
  }

 private:
  flash::Options options_;
  int window_ = 0;
  at::ScalarType last_dtype_ = at::kBFloat16;
  flash::KernelFamily last_family_ = flash::KernelFamily::mma_sync;  // what the last forward ran
};

// forward_persistent / backward_persistent: auto | true | false.
flash::Options::Persistent grid_choice(const std::string& text) {
  return text == "true" ? flash::Options::Persistent::on
         : text == "false" ? flash::Options::Persistent::off
                           : flash::Options::Persistent::automatic;
}

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "flash";
  m.version = "2";
  m.description = "FlashAttention-2 forward and backward as our own CUDA kernels (fp32, bf16, fp16; d 8..128)";
  m.options = {
      runner::opt_enum("kernel", {"auto", "mma_sync", "wgmma"}, "auto",
                       "tensor-core kernels for bf16/fp16: mma_sync (any GPU), wgmma (sm_90; other points are "
                       "skipped), auto (wgmma where it runs and d > 32, else mma_sync)"),
      runner::opt_enum("forward_schedule", {"auto", "pipelined", "serial", "warp_specialized"}, "auto",
                       "wgmma forward: softmax of a key tile under the previous tile's P V product (pipelined) or "
                       "after it (serial); warp_specialized: a TMA producer warpgroup feeds two consumer "
                       "warpgroups through an mbarrier ring; auto: the fastest measured"),
      runner::opt_bool("pingpong", true,
                       "warp_specialized forward: the two consumer warpgroups take turns issuing their MMAs"),
      runner::opt_enum("forward_persistent", {"auto", "true", "false"}, "auto",
                       "warp_specialized forward: true = SMs x resident blocks, each looping over tiles of the "
                       "block order (under a causal mask drawing the next from a counter), so a tile's output "
                       "write overlaps the next tile's loads; false = one block per tile; auto: persistent where "
                       "the tiles fill more than one wave"),
      runner::opt_enum("backward", {"auto", "fused", "deterministic", "warp_specialized", "warp_specialized_bulk_dq"},
                       "auto",
                       "wgmma backward: dQ summed with atomics inside the dK/dV kernel (fused; last bits vary "
                       "between runs), or a second kernel (deterministic: 1.4x the FLOPs, bit-for-bit repeatable); "
                       "warp_specialized: the fused kernel fed by a TMA producer warpgroup through an mbarrier "
                       "ring; warp_specialized_bulk_dq: the same with each step's dQ tile added from shared memory "
                       "by the copy engine (cp.reduce.async.bulk) instead of atomics; auto: the fastest measured "
                       "(warp_specialized_bulk_dq: git show 46d21d9:reports/flash_backward_bulk_dq/)"),
      runner::opt_bool("backward_pingpong", true,
                       "warp-specialized backward: the two consumer warpgroups take turns issuing their MMAs "
                       "(one computes P and dS while the other's MMAs run)"),
      runner::opt_enum("forward_query_tile", {"auto", "64", "128", "192"}, "auto",
                       "warp_specialized forward at head dim 64: query rows per block, 64 (one consumer warpgroup, "
                       "two blocks per SM), 128 (two consumer warpgroups) or 192 (three); auto: whichever finishes "
                       "the grid's tiles sooner over the SMs, and 128 under a sliding window of at most 1024 keys"),
      runner::opt_enum("backward_persistent", {"auto", "true", "false"}, "auto",
                       "warp-specialized backward: true = SMs x resident blocks, each drawing its next 128-key "
                       "tile from a counter, so the next tile's K and V load while the last one's dK and dV are "
                       "stored; false = one block per tile; auto: persistent where the tiles fill more than one "
                       "wave"),
      runner::opt_int("window", 0,
                      "sliding window: under a causal mask each query sees only itself and the window - 1 keys "
                      "before it (every kernel family); 0 = the caller's mask as it is")
          .in_range(0, 1 << 30),
      runner::opt_int("head_group", 0, "heads per group of the kernels' block order; 0 sizes groups to the L2 (without a causal mask, at most the heads the resident blocks cover)")
          .in_range(0, 65535)};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    flash::Options o;
    o.family = flash::parse_kernel_family(p.text("kernel"));
    o.forward_schedule = flash::parse_forward_schedule(p.text("forward_schedule"));
    o.pingpong = p.flag("pingpong");
    o.persistent_forward = grid_choice(p.text("forward_persistent"));
    o.forward_query_tile = p.text("forward_query_tile") == "auto" ? 0 : std::stoi(p.text("forward_query_tile"));
    o.backward_schedule = flash::parse_backward_schedule(p.text("backward"));
    o.backward_pingpong = p.flag("backward_pingpong");
    o.persistent_backward = grid_choice(p.text("backward_persistent"));
    o.head_group = static_cast<int>(p.integer("head_group"));
    return std::make_unique<FlashAttention>(o, static_cast<int>(p.integer("window")));
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
