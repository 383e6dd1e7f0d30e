// ddp/flat on Gloo ranks in one process (after backward, one all-reduce of all gradients flattened into one buffer): every
// rank ends with rank 0's weights and the mean gradient; NoSync leaves each its own.
#include "ddp_harness.hpp"

namespace runner::testing {
namespace {

RUNNER_DDP_STRATEGY_TESTS(FlatDdp, "flat", 1)

}  // namespace
}  // namespace runner::testing
