// ddp/bucketed on Gloo ranks in one process (one all-reduce per bucket (here one: the model is far below 25 MiB)): every
// rank ends with rank 0's weights and the mean gradient; NoSync leaves each its own.
#include "ddp_harness.hpp"

namespace runner::testing {
namespace {

RUNNER_DDP_STRATEGY_TESTS(BucketedDdp, "bucketed", 1)

}  // namespace
}  // namespace runner::testing
