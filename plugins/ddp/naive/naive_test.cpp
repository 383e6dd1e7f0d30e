// ddp/naive on Gloo ranks in one process (after backward, one blocking all-reduce per parameter): every
// rank ends with rank 0's weights and the mean gradient; NoSync leaves each its own.
#include "ddp_harness.hpp"

namespace runner::testing {
namespace {

RUNNER_DDP_STRATEGY_TESTS(NaiveDdp, "naive", kParameters)

}  // namespace
}  // namespace runner::testing
