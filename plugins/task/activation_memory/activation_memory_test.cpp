#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "task_harness.hpp"

namespace {

class ActivationMemoryTest : public runner::testing::TaskTest {
 protected:
  runner::Record run(const std::string& yaml) { return run_task_once("activation_memory", yaml); }
  static double number(const runner::Record& r, const std::string& name) {
    return runner::testing::metric_number(r, name);
  }
};

TEST_F(ActivationMemoryTest, ResidualStreamOf2p7BAtContext256IsTenMiB) {
  const auto r = run("{model: {name: transformer_lm, size: 2.7B, context_length: 256}}");
  EXPECT_DOUBLE_EQ(number(r, "activation_bytes"), 4.0 * 256 * 2560 * 4);  // 10,485,760
  EXPECT_DOUBLE_EQ(number(r, "activation_mib"), 10.0);
  EXPECT_EQ(std::get<std::string>(r.find("derivation")->value), "4 × 256 × 2560 × 4 B = 10,485,760 B = 10.0 MiB");
}

TEST_F(ActivationMemoryTest, ScalesWithContextBatchAndDtype) {
  const auto r = run("{model: {name: transformer_lm, size: 2.7B, context_length: 512}, batch_size: 2, dtype_bytes: 2}");
  EXPECT_DOUBLE_EQ(number(r, "activation_bytes"), 2.0 * 512 * 2560 * 2);
  EXPECT_EQ(std::get<std::string>(r.find("derivation")->value), "2 × 512 × 2560 × 2 B = 5,242,880 B = 5.0 MiB");
}

TEST_F(ActivationMemoryTest, TrainingStateIsSixteenBytesPerParameter) {
  const auto r = run("{model: {name: transformer_lm, size: 2.7B}}");
  // 32 x (4 x 2560^2 + 3 x 2560 x 10240 + 2 x 2560) + 2 x 10000 x 2560 + 2560
  EXPECT_DOUBLE_EQ(number(r, "parameter_count"), 3406809600.0);
  EXPECT_DOUBLE_EQ(number(r, "parameter_bytes"), 4.0 * 3406809600.0);
  EXPECT_DOUBLE_EQ(number(r, "optimizer_state_bytes"), 8.0 * 3406809600.0);
  EXPECT_DOUBLE_EQ(number(r, "training_state_bytes"), 16.0 * 3406809600.0);
}

TEST_F(ActivationMemoryTest, SmallActivationsKeepFourDecimals) {
  const auto r = run("{model: {name: transformer_lm, size: custom, d_model: 64, d_ff: 128, num_layers: 2, num_heads: 4, "
                     "context_length: 16}}");
  EXPECT_EQ(std::get<std::string>(r.find("derivation")->value), "4 × 16 × 64 × 4 B = 16,384 B = 0.0156 MiB");
}

TEST_F(ActivationMemoryTest, AModelThatDeclaresNoFactsIsSkippedNotAnError) {
  EXPECT_THROW(run("{model: {name: toy}}"), runner::SkipPoint);
}

}  // namespace
