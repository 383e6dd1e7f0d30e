// `runner launch`: starts N local ranks of this runner and supervises them.
//
// One launcher per node. Node 0's launcher hosts the rendezvous store (c10d
// TCPStore on --master-port, a free port on a single node); every launcher gives
// its ranks the torchrun variables (RANK = node_rank x N + local rank, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT). When a rank fails (non-zero exit or a signal) the others get
// SIGTERM, then SIGKILL after a grace period, and the launcher exits with the
// failed rank's code and its last error line; with several nodes it also posts
// the failure on the store, and every other launcher stops its ranks the same
// way. Ranks die with their launcher (PR_SET_PDEATHSIG), so none is orphaned.
#pragma once
#include <string>
#include <vector>

namespace runner {

struct LaunchSpec {
  int nproc = 1;                        // ranks on this node
  int nnodes = 1;                       // launchers, one per node
  int node_rank = 0;                    // this launcher's node
  std::string master_addr = "127.0.0.1";  // node 0's address, where the store listens
  int master_port = 0;                  // 0: a free port (one node only)
  std::vector<std::string> rank_args;   // argv of each rank after the program name
};

// The flags' values checked together; throws ConfigError naming the flag.
void check_launch_spec(const LaunchSpec& spec);

// Returns 0 when every rank exits 0, else the first failed rank's exit code
// (128 + signal for a rank killed by a signal).
int supervise_ranks(const LaunchSpec& spec);

}  // namespace runner
