#include <gtest/gtest.h>

#include <map>

#include "runner/device.hpp"
#include "task_harness.hpp"

namespace {

class AutocastDtypesTest : public runner::testing::TaskTest {
 protected:
  // tensor label -> dtype text, and the labels in emission order.
  std::map<std::string, std::string> run(c10::Device device, const std::string& precision,
                                         std::vector<std::string>* order = nullptr) {
    runner::Context ctx;
    ctx.device = device;
    ctx.precision = runner::Precision::parse(precision);
    std::map<std::string, std::string> dtypes;
    for (const auto& r : run_task("autocast_dtypes", "", ctx)) {
      const std::string tensor = r.labels.at("tensor");
      dtypes[tensor] = runner::testing::metric_text(r, "dtype");
      if (order) order->push_back(tensor);
    }
    return dtypes;
  }
};

TEST_F(AutocastDtypesTest, Fp32EverythingIsFloat32) {
  std::vector<std::string> order;
  const auto d = run(c10::kCPU, "fp32", &order);
  const std::vector<std::string> expected = {
      "fc1.weight", "ln.weight", "ln.bias", "fc2.weight", "fc1_output", "relu_output", "layer_norm_output",
      "logits", "loss", "fc1.weight.grad", "ln.weight.grad", "ln.bias.grad", "fc2.weight.grad"};
  EXPECT_EQ(order, expected);
  for (const auto& [tensor, dtype] : d) EXPECT_EQ(dtype, "float32") << tensor;
}

TEST_F(AutocastDtypesTest, Bf16AutocastOnCpuLowersMatmulsOnly) {
  const auto d = run(c10::kCPU, "bf16");
  EXPECT_EQ(d.at("fc1.weight"), "float32");
  EXPECT_EQ(d.at("fc1_output"), "bfloat16");
  EXPECT_EQ(d.at("logits"), "bfloat16");
  EXPECT_EQ(d.at("loss"), "float32");
  EXPECT_EQ(d.at("fc1.weight.grad"), "float32");  // gradients match their fp32 parameters
}

TEST_F(AutocastDtypesTest, Fp16AutocastOnCudaMatchesPyTorchsOpLists) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto d = run(c10::Device(c10::kCUDA, 0), "fp16");
  EXPECT_EQ(d.at("fc1.weight"), "float32");
  EXPECT_EQ(d.at("fc1_output"), "float16");
  EXPECT_EQ(d.at("layer_norm_output"), "float32");  // layer_norm is on autocast's fp32 list
  EXPECT_EQ(d.at("logits"), "float16");
  EXPECT_EQ(d.at("loss"), "float32");
  EXPECT_EQ(d.at("fc2.weight.grad"), "float32");
}

}  // namespace
