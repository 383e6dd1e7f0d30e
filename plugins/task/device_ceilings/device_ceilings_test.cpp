#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "registry.hpp"
#include "runner/device.hpp"
#include "runner/task.hpp"
#include "validate.hpp"

namespace {

using Collect = runner::RecordList;

class DeviceCeilingsTest : public ::testing::Test {
 protected:
  void SetUp() override { registry.scan({RUNNER_TEST_PLUGIN_DIR}); }

  runner::Record run_on(c10::Device device, const std::string& yaml) {
    runner::Context ctx;
    ctx.device = device;
    ctx.plugins = &registry;
    ctx.measure.warmup_steps = 1;
    ctx.measure.measured_steps = 3;
    const auto params = runner::resolve_plugin_options(registry, runner::PluginKind::Task, "device_ceilings", yaml);
    auto task = ctx.create<runner::Task>(runner::PluginKind::Task, params);
    Collect out;
    task->run(ctx, params, out);
    EXPECT_EQ(out.records.size(), 1u);
    return out.records.at(0);
  }

  static const runner::Stats& stats(const runner::Record& r, const std::string& name) {
    const runner::Metric* m = r.find(name);
    EXPECT_NE(m, nullptr) << name;
    return std::get<runner::Stats>(m->value);
  }

  runner::PluginRegistry registry;
};

TEST_F(DeviceCeilingsTest, MatmulRateIsFlopOverTime) {
  const auto r = run_on(c10::kCPU, "{op: matmul, size: 64}");
  const auto& time = stats(r, "time_ms");
  const auto& rate = stats(r, "tflops");
  EXPECT_EQ(time.n, 3);
  EXPECT_GT(rate.max, 0.0);
  // The fastest step gives the highest rate: rate = 2 n^3 / t.
  EXPECT_NEAR(rate.max, 2.0 * 64 * 64 * 64 / (time.min * 1e-3) / 1e12, rate.max * 1e-9);
  EXPECT_EQ(r.find("tflops")->unit, "TFLOP/s");
}

TEST_F(DeviceCeilingsTest, CopyCountsBytesReadAndWritten) {
  const auto r = run_on(c10::kCPU, "{op: copy, size: 1, dtype: fp32}");
  EXPECT_DOUBLE_EQ(std::get<double>(r.find("bytes_moved")->value), 2.0 * 1024 * 1024);
  EXPECT_GT(stats(r, "gbps").mean, 0.0);
}

TEST_F(DeviceCeilingsTest, Bf16MatmulRunsOnCpu) {
  EXPECT_GT(stats(run_on(c10::kCPU, "{op: matmul, size: 32, dtype: bf16}"), "tflops").mean, 0.0);
}

TEST_F(DeviceCeilingsTest, ZeroIterationsIsRejected) {
  EXPECT_THROW(run_on(c10::kCPU, "{op: matmul, size: 8, iterations_per_step: 0}"), std::invalid_argument);
}

TEST_F(DeviceCeilingsTest, CudaMatmulAndCopyReportPlausibleRates) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto mm = run_on(c10::Device(c10::kCUDA, 0), "{op: matmul, size: 2048, dtype: bf16}");
  EXPECT_GT(stats(mm, "tflops").median, 1.0);
  const auto copy = run_on(c10::Device(c10::kCUDA, 0), "{op: copy, size: 256}");
  EXPECT_GT(stats(copy, "gbps").median, 100.0);
}

}  // namespace
