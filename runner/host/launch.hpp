// `runner launch`: starts N local ranks of this runner and supervises them.
//
// The launcher hosts the rendezvous store (c10d TCPStore on a free port) and gives
// each rank the torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT). When a rank fails (non-zero exit or a signal) the
// others get SIGTERM, then SIGKILL after a grace period, and the launcher exits
// with the failed rank's code and its last error line. Ranks die with the
// launcher (PR_SET_PDEATHSIG), so none is ever orphaned.
#pragma once
#include <string>
#include <vector>

namespace runner {

struct LaunchSpec {
  int nproc = 1;
  std::vector<std::string> rank_args;  // argv of each rank after the program name
};

// Returns 0 when every rank exits 0, else the first failed rank's exit code
// (128 + signal for a rank killed by a signal).
int supervise_ranks(const LaunchSpec& spec);

}  // namespace runner
