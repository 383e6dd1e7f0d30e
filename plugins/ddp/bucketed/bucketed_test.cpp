// ddp/bucketed on Gloo ranks in one process (one all-reduce per bucket (here one: the model is far below 25 MiB)): every
// rank ends with rank 0's weights and the mean gradient; NoSync leaves each its own.
#include "ddp_harness.hpp"

namespace runner::testing {
namespace {

RUNNER_DDP_STRATEGY_TESTS(BucketedDdp, "bucketed", 1)

// reduce_dtype bf16: the all-reduce carries half the bytes, and the gradients are the mean
// rounded to bf16 (about 3 significant digits), not the fp32 mean.
TEST_F(BucketedDdp, Bf16WireCarriesHalfTheBytesAndTheMeanToBf16Precision) {
  for (const DdpStep& s : step("bucketed", 3, /*no_sync=*/false, "{reduce_dtype: bf16}")) {
    EXPECT_EQ(s.communication.collectives, 1);
    EXPECT_EQ(s.communication.bytes, kGradientBytes / 2);
    ASSERT_EQ(s.grads.size(), s.mean_grads.size());
    bool rounded = false;
    for (size_t i = 0; i < s.grads.size(); ++i) {
      EXPECT_EQ(s.grads[i].scalar_type(), torch::kFloat);  // the bucket stays fp32 for the optimizer
      EXPECT_TRUE(torch::allclose(s.grads[i], s.mean_grads[i], 2e-2, 1e-3))
          << "parameter " << i << ": max difference " << (s.grads[i] - s.mean_grads[i]).abs().max().item<double>();
      EXPECT_TRUE(torch::equal(s.grads[i], s.grads[i].to(torch::kBFloat16).to(torch::kFloat)))
          << "parameter " << i << " holds values a bf16 cannot";
      rounded = rounded || !torch::equal(s.grads[i], s.mean_grads[i]);
    }
    EXPECT_TRUE(rounded) << "no gradient differs from the fp32 mean: the wire was not bf16";
  }
}

}  // namespace
}  // namespace runner::testing
