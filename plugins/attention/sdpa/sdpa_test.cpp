#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "attention_check.hpp"

namespace {

using attention_check::Case;

const Case kCases[] = {{2, 3, 37, 16, false}, {2, 3, 37, 16, true}, {1, 2, 100, 32, true},
                       {2, 0, 65, 64, false}, {1, 2, 90, 128, true}};

TEST(SdpaAttention, MatchesNaiveInFp32OnCpu) {
  runner::PluginRegistry registry;
  auto sdpa = attention_check::load(registry, "sdpa");
  const auto seed = attention_check::fresh_seed();
  for (const Case& c : kCases) {
    const auto e = attention_check::compare_with_naive(*sdpa, c, torch::kFloat, torch::kCPU, seed);
    EXPECT_LT(e.max(), 1e-5) << c.name() << " seed " << seed;
  }
  EXPECT_NE(sdpa->mechanism().find("backend"), std::string::npos) << sdpa->mechanism();
}

TEST(SdpaAttention, MatchesNaiveOnCudaAndNamesTheFusedBackend) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto seed = attention_check::fresh_seed();
  for (const Case& c : kCases) {
    runner::PluginRegistry registry;
    auto sdpa = attention_check::load(registry, "sdpa");
    const auto e = attention_check::compare_with_naive(*sdpa, c, torch::kBFloat16, torch::kCUDA, seed);
    EXPECT_LT(e.max(), 2e-2) << c.name() << " bf16 seed " << seed;
    EXPECT_EQ(sdpa->mechanism().find("math"), std::string::npos) << sdpa->mechanism();
  }
}

TEST(SdpaAttention, BackendOptionIsChecked) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(registry, runner::PluginKind::Attention, "sdpa");
  params.set("backend", runner::Value(std::string("math")));
  runner::Context ctx;
  ctx.plugins = &registry;
  auto sdpa = ctx.create<runner::Attention>(runner::PluginKind::Attention, params);
  const auto e = attention_check::compare_with_naive(*sdpa, {1, 2, 33, 32, true}, torch::kFloat, torch::kCPU, 1);
  EXPECT_LT(e.max(), 1e-5);
  EXPECT_NE(sdpa->mechanism().find("math"), std::string::npos) << sdpa->mechanism();
}

}  // namespace
