// Multi-rank plugin tests in one process: each rank is a thread with its own Gloo
// process group (loopback TCP, an in-memory store), so DDP strategies, sharded
// optimizers and collective benchmarks run their real collectives on the CPU in a
// plain GoogleTest, without `runner launch`. Plugin test targets link it.
#pragma once
#include <functional>

#include "runner/context.hpp"

namespace runner::testing {

// Runs `body` on `world_size` ranks at once and returns when all have returned;
// rethrows the first rank's exception. A rank that fails before a collective
// leaves its peers waiting until the group's timeout (30 s), then they fail too.
void on_gloo_ranks(int world_size, const std::function<void(const Distributed& dist)>& body);

}  // namespace runner::testing
