// Which rank of which launch this process is: what the launcher's environment said
// (distributed.hpp's detect_launch_env reads it). Its own header so that the rank's
// helpers (the heartbeat) need not include the whole distributed side.
#pragma once
#include <string>

namespace runner {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int node_rank = 0;  // which node (launcher) this rank runs on
  int nodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher;      // "runner launch", "torchrun", "srun"
  bool agent_store = false;  // the launcher hosts the TCPStore; every rank is a client
  std::string store_prefix;  // torchrun's per-attempt key prefix on the agent's store
};

}  // namespace runner
