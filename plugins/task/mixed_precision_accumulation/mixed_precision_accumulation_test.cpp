#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "runner/device.hpp"
#include "task_harness.hpp"

namespace {

class MixedPrecisionAccumulationTest : public runner::testing::TaskTest {
 protected:
  runner::Record run_on(c10::Device device, const std::string& yaml) {
    runner::Context ctx;
    ctx.device = device;
    return run_task_once("mixed_precision_accumulation", yaml, ctx);
  }
  static double number(const runner::Record& r, const std::string& name) {
    return runner::testing::metric_number(r, name);
  }
  static std::string text(const runner::Record& r, const std::string& name) {
    return runner::testing::metric_text(r, name);
  }
};

// Expected values are PyTorch's own (the course snippet run in Python, CPU).
TEST_F(MixedPrecisionAccumulationTest, Fp32AccumulatorWithFp32AddendsDriftsSlightly) {
  const auto r = run_on(c10::kCPU, "{variant: fp32_acc_fp32_add}");
  EXPECT_FLOAT_EQ(number(r, "result"), 10.000133514404297);
  EXPECT_EQ(text(r, "result_dtype"), "float32");
  EXPECT_EQ(r.labels.at("variant"), "fp32_acc_fp32_add");
}

TEST_F(MixedPrecisionAccumulationTest, Fp16AccumulatorLosesAboutHalfPercent) {
  const auto r = run_on(c10::kCPU, "{variant: fp16_acc_fp16_add}");
  EXPECT_DOUBLE_EQ(number(r, "result"), 9.953125);
  EXPECT_DOUBLE_EQ(number(r, "abs_error"), 10.0 - 9.953125);
  EXPECT_NEAR(number(r, "rel_error"), 0.0046875, 1e-12);
  EXPECT_EQ(text(r, "result_dtype"), "float16");
}

TEST_F(MixedPrecisionAccumulationTest, Fp16AddendsInFp32CarryTheAddendsRepresentationError) {
  const auto implicit = run_on(c10::kCPU, "{variant: fp32_acc_fp16_add}");
  const auto cast = run_on(c10::kCPU, "{variant: fp32_acc_fp16_add_cast}");
  EXPECT_DOUBLE_EQ(number(implicit, "result"), 10.00213623046875);
  EXPECT_DOUBLE_EQ(number(cast, "result"), number(implicit, "result"));
  EXPECT_DOUBLE_EQ(number(cast, "stored_addend"), 0.01000213623046875);
  EXPECT_EQ(text(implicit, "result_dtype"), "float32");
}

TEST_F(MixedPrecisionAccumulationTest, ErrorIsMeasuredAgainstCountTimesAddend) {
  const auto r = run_on(c10::kCPU, "{variant: fp32_acc_fp32_add, count: 4, addend: 0.5}");
  EXPECT_DOUBLE_EQ(number(r, "exact"), 2.0);
  EXPECT_DOUBLE_EQ(number(r, "abs_error"), 0.0);
}

TEST_F(MixedPrecisionAccumulationTest, ZeroCountIsRejectedByTheOptionRange) {
  EXPECT_THROW(run_on(c10::kCPU, "{count: 0}"), runner::ConfigError);
}

TEST_F(MixedPrecisionAccumulationTest, CudaGivesTheSameRoundingAsCpu) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* v : {"fp32_acc_fp32_add", "fp16_acc_fp16_add", "fp32_acc_fp16_add", "fp32_acc_fp16_add_cast"}) {
    const std::string yaml = std::string("{variant: ") + v + "}";
    EXPECT_DOUBLE_EQ(number(run_on(c10::Device(c10::kCUDA, 0), yaml), "result"), number(run_on(c10::kCPU, yaml), "result"))
        << v;
  }
}

}  // namespace
