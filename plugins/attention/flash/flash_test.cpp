#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "attention_check.hpp"
#include "flash_attention.hpp"
#include "runner/outcome.hpp"

namespace {

using attention_check::Case;

// The last three: sliding windows (shorter than a tile, a whole tile, and crossing tiles).
const Case kCases[] = {{2, 3, 37, 16, false},    {2, 3, 37, 16, true},     {1, 2, 100, 32, true},
                       {2, 0, 65, 64, false},    {1, 2, 129, 64, true},    {1, 2, 190, 128, true},
                       {1, 2, 17, 128, false},   {1, 2, 100, 32, true, 17}, {2, 0, 129, 64, true, 64},
                       {1, 2, 190, 128, true, 33}};

class FlashAttentionPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    flash_ = attention_check::load(registry_, "flash");
  }
  runner::PluginRegistry registry_;
  std::unique_ptr<runner::Attention> flash_;
};

TEST_F(FlashAttentionPlugin, MatchesNaiveInFp32) {
  const auto seed = attention_check::fresh_seed();
  for (const Case& c : kCases) {
    const auto e = attention_check::compare_with_naive(*flash_, c, torch::kFloat, torch::kCUDA, seed);
    EXPECT_LT(e.max(), 2e-3) << c.name() << " seed " << seed << ": " << e;
  }
}

TEST_F(FlashAttentionPlugin, MatchesNaiveInBf16AndFp16) {
  const auto seed = attention_check::fresh_seed();
  for (auto dtype : {torch::kBFloat16, torch::kHalf})
    for (const Case& c : kCases) {
      const auto e = attention_check::compare_with_naive(*flash_, c, dtype, torch::kCUDA, seed);
      EXPECT_LT(e.max(), 2e-2) << c.name() << " seed " << seed << ": " << e;
    }
}

TEST_F(FlashAttentionPlugin, AcceptsHeadSplitViews) {
  auto x = torch::randn({2, 40, 4 * 32}, torch::TensorOptions().device(torch::kCUDA));
  auto heads = x.view({2, 40, 4, 32}).transpose(1, 2);  // not contiguous, as a model hands it over
  auto out = flash_->forward(heads, heads, heads, runner::AttentionMask::causal());
  plugins::naive_attention::NaiveAttention naive;
  EXPECT_LT(attention_check::rel_err(out, naive.forward(heads, heads, heads, runner::AttentionMask::causal())), 2e-3);
}

TEST_F(FlashAttentionPlugin, BadInputIsOneClearError) {
  auto q = torch::randn({1, 2, 16, 64}, torch::TensorOptions().device(torch::kCUDA));
  auto k = torch::randn({1, 2, 16, 32}, torch::TensorOptions().device(torch::kCUDA));
  try {
    flash_->forward(q, k, k, runner::AttentionMask::none());
    FAIL() << "mismatched head dims were accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("shapes must be"), std::string::npos);
  }
}

// Outside the fixture: the check runs before anything touches the device, so it holds on CPU too.
TEST(FlashAttentionPluginSkips, UnsupportedHeadDimAndDtypeSkipThePoint) {
  runner::PluginRegistry registry;
  auto flash = attention_check::load(registry, "flash");
  auto q = torch::randn({1, 2, 16, 100});
  try {
    flash->forward(q, q, q, runner::AttentionMask::none());
    FAIL() << "head dim 100 was accepted";
  } catch (const runner::SkipPoint& e) {
    EXPECT_NE(std::string(e.what()).find("head dim 100 is not supported"), std::string::npos) << e.what();
  }
  auto i = torch::zeros({1, 2, 16, 64}, torch::kInt);
  EXPECT_THROW(flash->forward(i, i, i, runner::AttentionMask::none()), runner::SkipPoint);
}

// The window option turns a caller's causal mask (a model's) into a sliding window.
TEST_F(FlashAttentionPlugin, WindowOptionNarrowsACausalMask) {
  auto windowed = attention_check::load(registry_, "flash", "{window: 20}");
  const auto x = torch::randn({1, 2, 150, 64}, torch::TensorOptions().device(torch::kCUDA));
  plugins::naive_attention::NaiveAttention naive;
  const auto want = naive.forward(x, x, x, runner::AttentionMask::sliding_window(20));
  EXPECT_LT(attention_check::rel_err(windowed->forward(x, x, x, runner::AttentionMask::causal()), want), 2e-3);
  // Without a causal mask from the caller there is no window to narrow.
  EXPECT_LT(attention_check::rel_err(windowed->forward(x, x, x, runner::AttentionMask::none()),
                                     naive.forward(x, x, x, runner::AttentionMask::none())),
            2e-3);
}

// kernel: wgmma, the Hopper kernels, in the default and the warp-specialized forward schedule
// (and the fused and bulk-dQ backwards beside the default warp-specialized one), every mask:
// checked where they run (sm_90), skipped points elsewhere.
TEST_F(FlashAttentionPlugin, WgmmaKernelsMatchNaiveInBf16AndFp16) {
  const auto probe = torch::zeros({1, 1, 8, 64}, torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA));
  if (!kernels::flash::wgmma_unsupported_reason(probe).empty()) GTEST_SKIP() << "not an sm_90 GPU";
  // Not seq 1: softmax over one key is constant, so the exact dQ and dK are zero and have no relative error.
  // The last two: sliding windows (crossing the 128-key tiles, and of two keys).
  const Case cases[] = {{1, 2, 2, 64, true},    {2, 3, 37, 64, false},  {1, 2, 129, 64, true},    {1, 2, 190, 128, true},
                        {1, 2, 17, 128, false}, {1, 1, 300, 128, true}, {2, 0, 257, 128, false}, {1, 2, 300, 128, true, 130},
                        {2, 3, 190, 64, true, 2}};
  const auto seed = attention_check::fresh_seed();
  for (const char* options : {"{kernel: wgmma}", "{kernel: wgmma, forward_schedule: warp_specialized}",
                              "{kernel: wgmma, forward_schedule: warp_specialized, backward: fused}",
                              "{kernel: wgmma, backward: warp_specialized_bulk_dq}"}) {
    auto wgmma = attention_check::load(registry_, "flash", options);
    for (auto dtype : {torch::kBFloat16, torch::kHalf})
      for (const Case& c : cases) {
        const auto e = attention_check::compare_with_naive(*wgmma, c, dtype, torch::kCUDA, seed);
        EXPECT_LT(e.max(), 2e-2) << options << " " << c.name() << " seed " << seed << ": " << e;
      }
    EXPECT_NE(wgmma->mechanism().find("wgmma"), std::string::npos);
  }
}

TEST_F(FlashAttentionPlugin, WgmmaKernelsSkipWhatTheyDoNotCover) {
  auto wgmma = attention_check::load(registry_, "flash", "{kernel: wgmma}");
  auto f = torch::randn({1, 2, 16, 64}, torch::TensorOptions().device(torch::kCUDA));
  EXPECT_THROW(wgmma->forward(f, f, f, runner::AttentionMask::none()), runner::SkipPoint);  // fp32
}

}  // namespace
