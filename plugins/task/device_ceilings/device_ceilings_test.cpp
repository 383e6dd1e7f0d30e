#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runner/device.hpp"
#include "task_harness.hpp"

namespace {

using runner::testing::metric_number;
using runner::testing::metric_stats;

class DeviceCeilingsTest : public runner::testing::TaskTest {
 protected:
  runner::Record run_on(c10::Device device, const std::string& yaml) {
    runner::Context ctx;
    ctx.device = device;
    ctx.measure.warmup_steps = 1;
    ctx.measure.measured_steps = 3;
    return run_task_once("device_ceilings", yaml, ctx);
  }
  static const runner::Stats& stats(const runner::Record& r, const std::string& name) { return metric_stats(r, name); }
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

TEST_F(DeviceCeilingsTest, ZeroIterationsIsRejectedByTheOptionRange) {
  EXPECT_THROW(run_on(c10::kCPU, "{op: matmul, size: 8, iterations_per_step: 0}"), runner::ConfigError);
}

TEST_F(DeviceCeilingsTest, CudaMatmulAndCopyReportPlausibleRates) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto mm = run_on(c10::Device(c10::kCUDA, 0), "{op: matmul, size: 2048, dtype: bf16}");
  EXPECT_GT(stats(mm, "tflops").median, 1.0);
  const auto copy = run_on(c10::Device(c10::kCUDA, 0), "{op: copy, size: 256}");
  EXPECT_GT(stats(copy, "gbps").median, 100.0);
}

}  // namespace
