// attention/flash_tiled: FlashAttention-2 forward and backward in tensor ops with explicit
// tiles (kernels/flash_attention/flash_reference.*), as an autograd function that saves
// O and the row log-sum-exp L and recomputes P in backward.
#include <memory>

#include <torch/autograd.h>

#include "attention_mask.hpp"
#include "flash_reference.hpp"
#include "runner/attention.hpp"
#include "runner/range.hpp"

namespace {

namespace reference = kernels::flash::reference;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct FlashTiledFunction : torch::autograd::Function<FlashTiledFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, std::int64_t mask_kind, std::int64_t window,
                               std::int64_t tile_q, std::int64_t tile_k) {
    runner::ScopedRange range("attention/flash_tiled_forward");
    const auto mask = kernels::flash::Mask::of(static_cast<kernels::flash::MaskKind>(mask_kind), static_cast<int>(window));
    auto r = reference::forward(q, k, v, mask, {tile_q, tile_k});
    ctx->save_for_backward({q, k, v, r.out, r.lse});
    ctx->saved_data["mask_kind"] = mask_kind;
    ctx->saved_data["window"] = window;
    ctx->saved_data["tile_q"] = tile_q;
    ctx->saved_data["tile_k"] = tile_k;
    return r.out;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    runner::ScopedRange range("attention/flash_tiled_backward");
    const auto s = ctx->get_saved_variables();
    const reference::Tiles tiles{ctx->saved_data["tile_q"].toInt(), ctx->saved_data["tile_k"].toInt()};
    const auto mask = kernels::flash::Mask::of(static_cast<kernels::flash::MaskKind>(ctx->saved_data["mask_kind"].toInt()),
                                               static_cast<int>(ctx->saved_data["window"].toInt()));
    auto g = reference::backward(s[0], s[1], s[2], s[3], grads[0], s[4], mask, tiles);
    return {g.dq, g.dk, g.dv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class FlashTiledAttention : public runner::Attention {
 public:
  explicit FlashTiledAttention(reference::Tiles tiles) : tiles_(tiles) {}
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override {
    const kernels::flash::Mask m = kernels::flash::mask_of(mask);
    return FlashTiledFunction::apply(q, k, v, static_cast<std::int64_t>(m.kind), std::int64_t{m.window}, tiles_.query,
                                     tiles_.key);
  }
  std::string mechanism() const override {
    return "tensor ops, tiles " + std::to_string(tiles_.query) + "x" + std::to_string(tiles_.key);
  }

 private:
  reference::Tiles tiles_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "flash_tiled";
  m.version = "1";
  m.description = "FlashAttention-2 forward and backward in tensor ops with explicit tiles (reference for the kernels)";
  m.options = {runner::opt_int("tile_q", 64, "query rows per tile (>= 16)"),
               runner::opt_int("tile_k", 64, "key columns per tile (>= 16)")};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    const reference::Tiles tiles{p.integer("tile_q"), p.integer("tile_k")};
    if (tiles.query < 16 || tiles.key < 16)
      throw std::invalid_argument("attention/flash_tiled: tile_q and tile_k must be >= 16, got " +
                                  std::to_string(tiles.query) + " and " + std::to_string(tiles.key));
    return std::make_unique<FlashTiledAttention>(tiles);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
