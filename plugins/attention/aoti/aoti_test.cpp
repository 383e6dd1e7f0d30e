#include <filesystem>

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "attention_check.hpp"
#include "runner/outcome.hpp"

namespace {

using attention_check::Case;

// Odd lengths, every head dim of the grid, with and without heads, causal and not.
const Case kCases[] = {{2, 3, 37, 16, false}, {2, 3, 37, 16, true},   {1, 2, 100, 32, true}, {2, 0, 65, 64, false},
                       {1, 2, 129, 64, true}, {1, 2, 70, 128, true}, {1, 2, 17, 128, false}};

std::unique_ptr<runner::Attention> load_aoti(runner::PluginRegistry& registry, const std::string& dir) {
  return attention_check::load(registry, "aoti", "{package_dir: '" + dir + "'}");
}

class AotiAttentionPlugin : public ::testing::Test {
 protected:
  void SetUp() override { aoti_ = load_aoti(registry_, AOTI_TEST_PACKAGES); }
  runner::PluginRegistry registry_;
  std::unique_ptr<runner::Attention> aoti_;
};

void expect_matches_naive(runner::Attention& aoti, torch::Device device, double limit) {
  const auto seed = attention_check::fresh_seed();
  for (const Case& c : kCases) {
    const auto e = attention_check::compare_with_naive(aoti, c, torch::kFloat, device, seed);
    EXPECT_LT(e.max(), limit) << c.name() << " seed " << seed << ": " << e;
  }
}

TEST_F(AotiAttentionPlugin, MatchesNaiveInFp32OnCpu) {
  expect_matches_naive(*aoti_, torch::kCPU, 1e-5);
  EXPECT_NE(aoti_->mechanism().find("AOTInductor"), std::string::npos) << aoti_->mechanism();
}

TEST_F(AotiAttentionPlugin, MatchesNaiveInFp32OnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_matches_naive(*aoti_, torch::kCUDA, 2e-3);
  EXPECT_NE(aoti_->mechanism().find("triton"), std::string::npos) << aoti_->mechanism();
}

TEST_F(AotiAttentionPlugin, AcceptsHeadSplitViews) {
  auto x = torch::randn({2, 40, 4 * 32});
  auto heads = x.view({2, 40, 4, 32}).transpose(1, 2);  // not contiguous, as a model hands it over
  auto out = aoti_->forward(heads, heads, heads, runner::AttentionMask::causal());
  plugins::naive_attention::NaiveAttention naive;
  EXPECT_LT(attention_check::rel_err(out, naive.forward(heads, heads, heads, runner::AttentionMask::causal())), 1e-5);
}

TEST_F(AotiAttentionPlugin, AMissingPackageSkipsThePointNamingTheExportCommand) {
  auto q = torch::randn({1, 2, 16, 32}).to(torch::kBFloat16);  // only fp32 is exported for the tests
  try {
    aoti_->forward(q, q, q, runner::AttentionMask::none());
    FAIL() << "a dtype without a package was accepted";
  } catch (const runner::SkipPoint& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("attention_fwd_cpu_bf16_full.pt2"), std::string::npos) << what;
    EXPECT_NE(what.find("export_attention.py --out"), std::string::npos) << what;
  }
}

TEST_F(AotiAttentionPlugin, BadInputIsOneClearError) {
  auto q = torch::randn({1, 2, 16, 64});
  auto k = torch::randn({1, 2, 16, 32});
  try {
    aoti_->forward(q, k, k, runner::AttentionMask::none());
    FAIL() << "mismatched head dims were accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("shapes must be"), std::string::npos);
  }
}

TEST(AotiAttentionOptions, AMissingPackageDirIsNamedWithTheFix) {
  runner::PluginRegistry registry;
  try {
    load_aoti(registry, "/nonexistent/aoti");
    FAIL() << "a missing package_dir was accepted";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("package_dir '/nonexistent/aoti' is not a directory"), std::string::npos) << what;
    EXPECT_NE(what.find("export_attention.py --out /nonexistent/aoti --device cuda"), std::string::npos) << what;
  }
}

}  // namespace
