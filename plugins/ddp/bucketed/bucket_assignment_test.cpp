// ddp/bucketed's layout on CPU tensors: reverse order, the byte limit, oversized
// parameters alone, a dtype change starting a new bucket.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "bucket_assignment.hpp"

namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

at::Tensor floats(std::int64_t n) { return torch::zeros({n}, torch::kFloat32); }  // 4n bytes

TEST(BucketAssignment, FillsBucketsInReverseParameterOrderUpToTheLimit) {
  const std::vector<at::Tensor> params = {floats(10), floats(10), floats(10), floats(10), floats(10)};
  // 40 bytes each, 100 per bucket: two fit, the third starts the next bucket.
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 100), (Buckets{{4, 3}, {2, 1}, {0}}));
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 200), (Buckets{{4, 3, 2, 1, 0}}));
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 120), (Buckets{{4, 3, 2}, {1, 0}}));
}

TEST(BucketAssignment, AParameterLargerThanABucketGetsItsOwn) {
  const std::vector<at::Tensor> params = {floats(1), floats(100), floats(1)};
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 16), (Buckets{{2}, {1}, {0}}));
}

TEST(BucketAssignment, ADtypeChangeStartsANewBucket) {
  const std::vector<at::Tensor> params = {floats(1), torch::zeros({1}, torch::kBFloat16), floats(1), floats(1)};
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 1e6), (Buckets{{3, 2}, {1}, {0}}));
}

TEST(BucketAssignment, TheFirstBucketHasItsOwnLimit) {
  const std::vector<at::Tensor> params = {floats(10), floats(10), floats(10), floats(10), floats(10)};
  // 40 bytes each: the first bucket (the last parameters) takes one, the rest fill 120-byte buckets.
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 120, 40), (Buckets{{4}, {3, 2, 1}, {0}}));
  EXPECT_EQ(ddp_bucketed::bucket_assignment(params, 120, 0), (Buckets{{4, 3, 2}, {1, 0}}));
}

TEST(BucketAssignment, NoParametersNoBuckets) { EXPECT_TRUE(ddp_bucketed::bucket_assignment({}, 100).empty()); }

}  // namespace
