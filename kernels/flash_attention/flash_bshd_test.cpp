// The [batch, seq, heads, d] entry points (forward_bshd, backward_bshd, attention) on strided
// views: q, k, v sliced out of fused projections, out written as [batch, seq, heads * d], the
// gradients written into a fused buffer. CPU: the tensor-op reference against the tiled
// reference and against finite differences; GPU (skipped without one): every kernel family
// against the fp64 textbook formula for head dims 64, 80, 96 and 128, bf16 and fp16, causal
// and not, odd lengths, batch * heads from 1 to over 1000.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "flash_attention.hpp"
#include "flash_reference.hpp"
#include "flash_test_support.hpp"

namespace {

namespace flash = kernels::flash;

using flash_test::error_of;
using flash_test::fresh_seed;
using flash_test::causal_if;
using flash_test::kCausal;
using flash_test::kNoMask;
using flash_test::rel_err;
using flash_test::sliding_window;


// q, k, v as a model makes them: slices of one [batch, seq, 3, heads, d] projection when
// lq == lk, else q from its own and k, v from a [batch, lk, 2, heads, d] one.
struct Views {
  torch::Tensor q, k, v;
};
Views packed_views(std::int64_t batch, std::int64_t lq, std::int64_t lk, std::int64_t heads, std::int64_t d,
                   const torch::TensorOptions& opts) {
  if (lq == lk) {
    auto qkv = torch::randn({batch, lq, 3, heads, d}, opts);
    return {qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2)};
  }
  auto q = torch::randn({batch, lq, heads, d}, opts), kv = torch::randn({batch, lk, 2, heads, d}, opts);
  return {q, kv.select(2, 0), kv.select(2, 1)};
}

// [batch, seq, heads, d] -> [batch, heads, seq, d] in fp64.
torch::Tensor heads_first(const torch::Tensor& t) { return t.detach().to(torch::kDouble).transpose(1, 2); }

struct Expected {
  torch::Tensor out, dq, dk, dv;  // out [batch, lq, heads * d]; gradients [batch, seq, heads, d]
};

// The textbook formula in fp64 with delta = rowsum(O dO) taken on `saved_out` (the kernel's
// own rounded output, on which FlashAttention's backward is defined; flash_attention_test.cpp
// says why).
Expected textbook(const Views& in, const torch::Tensor& dout, const torch::Tensor& saved_out, bool causal) {
  const auto q = heads_first(in.q), k = heads_first(in.k), v = heads_first(in.v);
  const auto shape = in.q.sizes();
  const auto d_o = heads_first(dout.reshape(shape)), o = heads_first(saved_out.reshape(shape));
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape[3]));
  auto s = torch::matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) {
    const auto hide = torch::ones({s.size(-2), s.size(-1)}, s.options().dtype(torch::kBool)).triu(1);
    s = s.masked_fill(hide, -std::numeric_limits<double>::infinity());
  }
  const auto p = torch::softmax(s, -1);
  const auto delta = (o * d_o).sum(-1, true);
  const auto ds = p * (torch::matmul(d_o, v.transpose(-2, -1)) - delta);
  auto back = [](const torch::Tensor& t) { return t.transpose(1, 2); };
  return {back(torch::matmul(p, v)).reshape({shape[0], shape[1], shape[2] * shape[3]}),
          back(torch::matmul(ds, k) * scale), back(torch::matmul(ds.transpose(-2, -1), q) * scale),
          back(torch::matmul(p.transpose(-2, -1), d_o))};
}

TEST(FlashBshdReference, MatchesTheTiledReferenceOnStridedViews) {
  const auto seed = fresh_seed();
  torch::manual_seed(seed);
  for (bool causal : {false, true}) {
    const Views in = packed_views(2, 37, 37, 3, 80, torch::TensorOptions().dtype(torch::kDouble));
    const auto out = flash::attention_reference(in.q, in.k, in.v, causal_if(causal));
    ASSERT_EQ(out.sizes(), (std::vector<std::int64_t>{2, 37, 3 * 80}));
    const auto tiled = flash::reference::forward(in.q.transpose(1, 2), in.k.transpose(1, 2), in.v.transpose(1, 2),
                                                 causal_if(causal), {16, 16});
    EXPECT_LT(rel_err(out, tiled.out.transpose(1, 2).reshape({2, 37, 240})), 1e-12) << "seed " << seed;
  }
}

// gradcheck's test: each gradient entry against a central difference, here of the loss
// sum(out * w). fp64 must agree to rounding; fp32 autograd against the fp64 differences.
TEST(FlashBshdReference, GradientsMatchFiniteDifferences) {
  const auto seed = fresh_seed();
  torch::manual_seed(seed);
  const Views base = packed_views(1, 5, 5, 2, 8, torch::TensorOptions().dtype(torch::kDouble));
  const auto w = torch::randn({1, 5, 16}, torch::kDouble);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    std::vector<torch::Tensor> leaves = {base.q.to(dtype).clone().requires_grad_(true),
                                         base.k.to(dtype).clone().requires_grad_(true),
                                         base.v.to(dtype).clone().requires_grad_(true)};
    const auto out = flash::attention_reference(leaves[0], leaves[1], leaves[2], kCausal);
    const auto grads = torch::autograd::grad({(out.to(torch::kDouble) * w).sum()}, leaves);
    for (int which = 0; which < 3; ++which) {
      std::vector<torch::Tensor> x = {base.q.clone(), base.k.clone(), base.v.clone()};
      auto flat = x[which].view({-1});
      auto numeric = torch::empty_like(flat);
      const double eps = 1e-6;
      for (std::int64_t i = 0; i < flat.numel(); ++i) {
        const double keep = flat[i].item<double>();
        flat[i] = keep + eps;
        const double up = (flash::attention_reference(x[0], x[1], x[2], kCausal) * w).sum().item<double>();
        flat[i] = keep - eps;
        const double down = (flash::attention_reference(x[0], x[1], x[2], kCausal) * w).sum().item<double>();
        flat[i] = keep;
        numeric[i] = (up - down) / (2 * eps);
      }
      const double tol = dtype == torch::kDouble ? 1e-7 : 1e-5;
      EXPECT_LT(rel_err(grads[which].reshape({-1}), numeric), tol)
          << "d" << "qkv"[which] << " " << (dtype == torch::kDouble ? "fp64" : "fp32") << " seed " << seed;
    }
  }
}

TEST(FlashBshdReference, AttentionRunsTheReferenceOffTheGpu) {
  const Views in = packed_views(2, 9, 9, 2, 16, torch::TensorOptions().dtype(torch::kFloat));
  const auto out = flash::attention(in.q, in.k, in.v, kCausal);
  EXPECT_TRUE(torch::equal(out, flash::attention_reference(in.q, in.k, in.v, kCausal)));
}

TEST(FlashBshdInputs, EachBadShapeGetsOneClearError) {
  auto t = [](std::vector<std::int64_t> shape) { return torch::zeros(shape); };
  const auto q = t({1, 8, 2, 64});
  EXPECT_NE(error_of([&] { flash::forward_bshd(q, t({1, 8, 3, 64}), t({1, 8, 3, 64}), kCausal); })
                .find("shapes must be q [batch, lq, heads, d], k = v [batch, lk, heads, d]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { flash::forward_bshd(t({8, 2, 64}), t({8, 2, 64}), t({8, 2, 64}), kCausal); })
                .find("shapes must be"),
            std::string::npos);
  EXPECT_NE(error_of([&] { flash::forward_bshd(t({1, 8, 2, 72 + 4}), t({1, 8, 2, 76}), t({1, 8, 2, 76}), kCausal); })
                .find("head dim 76 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([&] { flash::forward_bshd(q, q, q, kCausal); }).find("must be CUDA tensors"), std::string::npos);
}

class FlashBshdKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  // What can run here: mma_sync everywhere; on Hopper wgmma with its default forward and the
  // warp-specialized one, loading with TMA and with cp.async (all with the default backward,
  // warp-specialized), and the fused backward.
  static std::vector<flash::Options> families() {
    flash::Options mma_sync;
    mma_sync.family = flash::KernelFamily::mma_sync;
    std::vector<flash::Options> all = {mma_sync};
    const auto probe = torch::zeros({1, 8, 64}, torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA));
    if (!flash::wgmma_unsupported_reason(probe).empty()) return all;
    flash::Options wgmma;
    wgmma.family = flash::KernelFamily::wgmma;
    all.push_back(wgmma);
    wgmma.forward_schedule = flash::ForwardSchedule::warp_specialized;
    all.push_back(wgmma);
    wgmma.tma_loads = false;
    all.push_back(wgmma);
    wgmma.tma_loads = true;
    // The default backward adds dQ with the copy engine; these with atomics and in the fused kernel.
    wgmma.backward_schedule = flash::BackwardSchedule::warp_specialized;
    all.push_back(wgmma);
    wgmma.backward_schedule = flash::BackwardSchedule::fused;
    all.push_back(wgmma);
    return all;
  }
};

struct Shape {
  std::int64_t batch, lq, lk, heads, d;
  bool causal;
};

std::string name(const Shape& s, torch::Dtype dtype, const flash::Options& o) {
  const bool schedule = o.family == flash::KernelFamily::wgmma && o.forward_schedule != flash::ForwardSchedule::automatic;
  return std::string(flash::to_string(o.family)) +
         (schedule ? std::string(" ") + flash::to_string(o.forward_schedule) + (o.tma_loads ? "" : " (cp.async)") : "") +
         " backward " + flash::to_string(o.backward_schedule) +
         (dtype == torch::kHalf ? " fp16" : dtype == torch::kFloat ? " fp32" : " bf16") +
         " b" + std::to_string(s.batch) + " lq" + std::to_string(s.lq) + " lk" + std::to_string(s.lk) + " h" +
         std::to_string(s.heads) + " d" + std::to_string(s.d) + (s.causal ? " causal" : "");
}

// Forward and backward on packed views against the textbook formula; every element of the
// output and of the gradients (written into a NaN-poisoned fused buffer) is checked.
void expect_matches_textbook(const Shape& s, torch::Dtype dtype, const flash::Options& o, std::uint64_t seed) {
  SCOPED_TRACE(name(s, dtype, o) + " seed " + std::to_string(seed));
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
  const Views in = packed_views(s.batch, s.lq, s.lk, s.heads, s.d, opts);
  const auto dout = torch::randn({s.batch, s.lq, s.heads * s.d}, opts);
  const auto fwd = flash::forward_bshd(in.q, in.k, in.v, causal_if(s.causal), o);
  ASSERT_EQ(fwd.out.sizes(), (std::vector<std::int64_t>{s.batch, s.lq, s.heads * s.d}));
  ASSERT_EQ(fwd.lse.sizes(), (std::vector<std::int64_t>{s.batch, s.heads, s.lq}));
  const Expected want = textbook(in, dout, fwd.out, s.causal);
  const double tol = dtype == torch::kBFloat16 ? 2e-2 : dtype == torch::kHalf ? 1e-2 : 2e-3;
  EXPECT_LT(rel_err(fwd.out, want.out), tol) << "out";
  const auto g = flash::backward_bshd(in.q, in.k, in.v, fwd.out, dout, fwd.lse, causal_if(s.causal), o);
  EXPECT_LT(rel_err(g.dq, want.dq), tol) << "dq";
  EXPECT_LT(rel_err(g.dk, want.dk), tol) << "dk";
  EXPECT_LT(rel_err(g.dv, want.dv), tol) << "dv";
  if (s.lq != s.lk) return;
  // The same gradients written into slices of one [batch, seq, 3, heads, d] buffer.
  auto fused = torch::full({s.batch, s.lq, 3, s.heads, s.d}, std::nan(""), opts);
  const flash::Gradients into{fused.select(2, 0), fused.select(2, 1), fused.select(2, 2)};
  flash::backward_bshd(in.q, in.k, in.v, fwd.out, dout, fwd.lse, causal_if(s.causal), o, &into);
  EXPECT_FALSE(torch::isnan(fused).any().item<bool>()) << "an element of the fused gradient was not written";
  EXPECT_TRUE(torch::equal(into.dk, g.dk) && torch::equal(into.dv, g.dv));
  EXPECT_LT(rel_err(into.dq, g.dq), 1e-2);  // the fused wgmma dQ sums with atomics
}

TEST_F(FlashBshdKernel, EveryFamilyHeadDimAndDtypeMatchesTheTextbookFormula) {
  const auto seed = fresh_seed();
  const Shape shapes[] = {{2, 77, 77, 3, 64, true},  {1, 130, 130, 2, 80, true}, {2, 65, 65, 2, 96, false},
                          {1, 200, 200, 2, 128, true}, {1, 150, 150, 2, 96, true}, {1, 45, 120, 2, 80, false},
                          // several 176-key tiles at the forward's native 80 and 96 columns, and head dims
                          // between them (columns past d arrive as zeros)
                          {1, 400, 400, 2, 96, false}, {1, 333, 333, 2, 80, false}, {1, 300, 300, 2, 72, false},
                          {1, 260, 260, 2, 88, true}};
  for (const flash::Options& o : families())
    for (auto dtype : {torch::kBFloat16, torch::kHalf})
      for (const Shape& s : shapes) expect_matches_textbook(s, dtype, o, seed);
}

TEST_F(FlashBshdKernel, Fp32OnCudaCoresTakesThePaddedHeadDims) {
  const auto seed = fresh_seed();
  for (const Shape& s : {Shape{1, 50, 50, 2, 80, true}, Shape{2, 33, 33, 1, 96, false}})
    expect_matches_textbook(s, torch::kFloat, flash::Options{}, seed);
}

TEST_F(FlashBshdKernel, OneHeadAndOverAThousandHeads) {
  const auto seed = fresh_seed();
  for (const flash::Options& o : families()) {
    expect_matches_textbook({1, 300, 300, 1, 128, true}, torch::kBFloat16, o, seed);
    expect_matches_textbook({4, 33, 33, 260, 64, true}, torch::kBFloat16, o, seed);  // 1040 heads
  }
}

// K and V broadcast over heads (stride 0, as an expand makes them): no tensor map describes
// that, so the warp-specialized forward loads with cp.async; the output is still right.
TEST_F(FlashBshdKernel, WarpSpecializedForwardTakesKeysBroadcastOverHeads) {
  if (families().size() < 3) GTEST_SKIP() << "not an sm_90 GPU";
  torch::manual_seed(fresh_seed());
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const Views in{torch::randn({2, 150, 4, 64}, opts), torch::randn({2, 150, 1, 64}, opts).expand({2, 150, 4, 64}),
                 torch::randn({2, 150, 1, 64}, opts).expand({2, 150, 4, 64})};
  ASSERT_EQ(in.k.stride(2), 0);
  flash::Options o;
  o.family = flash::KernelFamily::wgmma;
  o.forward_schedule = flash::ForwardSchedule::warp_specialized;
  const auto out = flash::forward_bshd(in.q, in.k, in.v, kCausal, o).out;
  const auto dout = torch::zeros_like(out);
  EXPECT_LT(rel_err(out, textbook(in, dout, out, true).out), 2e-2);
}

// The same broadcast keys through the warp-specialized backward: no tensor map, so it runs the
// fused kernel instead (with bulk dQ asked for, on a re-zeroed row-major buffer); every gradient
// is still right.
TEST_F(FlashBshdKernel, WarpSpecializedBackwardTakesKeysBroadcastOverHeads) {
  if (families().size() < 3) GTEST_SKIP() << "not an sm_90 GPU";
  const auto seed = fresh_seed();
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const Views in{torch::randn({2, 150, 4, 64}, opts), torch::randn({2, 150, 1, 64}, opts).expand({2, 150, 4, 64}),
                 torch::randn({2, 150, 1, 64}, opts).expand({2, 150, 4, 64})};
  for (const bool bulk_dq : {false, true}) {
    flash::Options o;
    o.family = flash::KernelFamily::wgmma;
    o.backward_schedule =
        bulk_dq ? flash::BackwardSchedule::warp_specialized_bulk_dq : flash::BackwardSchedule::warp_specialized;
    const auto fwd = flash::forward_bshd(in.q, in.k, in.v, kCausal, o);
    const auto dout = torch::randn_like(fwd.out);
    const Expected want = textbook(in, dout, fwd.out, true);
    const auto g = flash::backward_bshd(in.q, in.k, in.v, fwd.out, dout, fwd.lse, kCausal, o);
    EXPECT_LT(rel_err(g.dq, want.dq), 2e-2) << "dq seed " << seed << " bulk_dq " << bulk_dq;
    EXPECT_LT(rel_err(g.dk, want.dk), 2e-2) << "dk seed " << seed << " bulk_dq " << bulk_dq;
    EXPECT_LT(rel_err(g.dv, want.dv), 2e-2) << "dv seed " << seed << " bulk_dq " << bulk_dq;
  }
}

// The differentiable op: autograd's gradients are backward_bshd's, and the [batch, heads,
// seq, d] API gives the same numbers on the same data.
TEST_F(FlashBshdKernel, AttentionIsDifferentiableAndAgreesWithTheHeadsFirstApi) {
  torch::manual_seed(7);
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  auto qkv = torch::randn({2, 100, 3, 4, 64}, opts).requires_grad_(true);
  const auto q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
  const auto out = flash::attention(q, k, v, kCausal);
  const auto dout = torch::randn_like(out);
  out.backward(dout);
  const auto fwd = flash::forward_bshd(q.detach(), k.detach(), v.detach(), kCausal);
  const auto g = flash::backward_bshd(q.detach(), k.detach(), v.detach(), fwd.out, dout, fwd.lse, kCausal);
  EXPECT_TRUE(torch::equal(out, fwd.out));
  EXPECT_TRUE(torch::equal(qkv.grad().select(2, 1), g.dk) && torch::equal(qkv.grad().select(2, 2), g.dv));
  EXPECT_LT(rel_err(qkv.grad().select(2, 0), g.dq), 1e-2);
  const auto heads_first_out =
      flash::forward(q.detach().transpose(1, 2).contiguous(), k.detach().transpose(1, 2).contiguous(),
                     v.detach().transpose(1, 2).contiguous(), kCausal)
          .out;
  EXPECT_TRUE(torch::equal(heads_first_out.transpose(1, 2).reshape({2, 100, 256}), fwd.out));
}

}  // namespace
