// ddp/overlap on Gloo ranks in one process (one all-reduce per parameter, started by its gradient hook during backward): every
// rank ends with rank 0's weights and the mean gradient; NoSync leaves each its own.
#include "ddp_harness.hpp"

namespace runner::testing {
namespace {

RUNNER_DDP_STRATEGY_TESTS(OverlapDdp, "overlap", kParameters)

}  // namespace
}  // namespace runner::testing
