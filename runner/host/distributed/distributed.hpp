// Multi-process runs on the host side: which launcher started this process
// (runner launch, torchrun, srun), rendezvous over c10d's TCPStore, the process
// group, and moving every rank's records to rank 0, the only rank that writes.
//
// Environment read, first match wins:
//   torchrun / runner launch: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
//                             GROUP_RANK and GROUP_WORLD_SIZE (node and nodes)
//   Slurm (srun):             SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//                             SLURM_NNODES, first host of SLURM_JOB_NODELIST (or
//                             MASTER_ADDR), MASTER_PORT (default 29500 + job id % 1000)
// RUNNER_DIST_TIMEOUT_S bounds every collective and store wait (default 300 s).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "runner/stored_record.hpp"

#include "distributed/launch_env.hpp"
#include "runner/context.hpp"

namespace c10d { class Store; }

namespace runner {

struct Point;
struct ExperimentSpec;
class PluginRegistry;

// nullopt without launcher variables (or with a world of one). Throws
// ConfigError naming the variable when the values do not make sense.
std::optional<LaunchEnv> detect_launch_env();
// "node[03-05,9],gpu7" -> "node03".
std::string first_slurm_host(const std::string& nodelist);
std::chrono::milliseconds collective_timeout();
// Ranks on this node: LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE, else local rank + 1.
int ranks_per_node(const LaunchEnv& env);
// cuda:<local_rank>, made the current device; throws when there is no such GPU.
c10::Device use_local_gpu(int local_rank);
// "auto", "gloo" or "nccl"; throws ConfigError on anything else.
std::string checked_backend(const std::string& flag);

// Bad input that is cheap to catch before any rank starts: more ranks per node
// than GPUs, a DDP plugin in a single-process run, NCCL on a CPU run.
void check_distributed_setup(const std::vector<Point>& points, const c10::Device& device, int world_size,
                             int ranks_per_node, const std::string& backend, const PluginRegistry& registry);

// An experiment's `processes: N` says it runs on N ranks; a single process gets a
// one-line error saying how to launch it.
void check_processes_key(const ExperimentSpec& exp, int world_size);

class DistributedSession {
 public:
  // Connects to the store and builds the process group. `device` must already be
  // this rank's device (cuda:<local_rank> or cpu).
  DistributedSession(const LaunchEnv& env, const c10::Device& device, const std::string& backend);
  ~DistributedSession();

  const Distributed& dist() const { return dist_; }
  // Every rank gets rank 0's `value` for `key` (e.g. the run directory).
  std::string agree(const std::string& key, const std::string& value);
  // Rank != 0 hands its records of point `index` to rank 0; rank 0 collects all
  // ranks' (its own first). Waits at most the collective timeout. Each rank's
  // records carry its `placement` (placement_of).
  void send_records(int index, const std::vector<StoredRecord>& records);
  std::vector<std::vector<StoredRecord>> gather_records(int index, std::vector<StoredRecord> own);
  // Tears down communicators so this rank leaves no peer half-way in a collective.
  void abort();

 private:
  LaunchEnv env_;
  c10::intrusive_ptr<c10d::Store> store_;
  Distributed dist_;
  std::unique_ptr<class Heartbeat> heartbeat_;  // last: stops first
};

// Where this rank ran: {rank, local_rank, node_rank, nodes, world_size, host, pid}.
nlohmann::json placement_of(const LaunchEnv& env);

// What rank 0 appends for one point: each rank's records labelled rank=<r>, then
// one aggregate per record position with no rank label (last, so tables that do
// not ask for a rank show it): times (ms, s) max over ranks, rates (x/s) min,
// memory (bytes, GiB) max, anything else rank 0's; status = the first failed rank's.
std::vector<StoredRecord> merge_rank_records(const std::vector<std::vector<StoredRecord>>& per_rank);

// Writes `message` where the launcher looks for a rank's last words
// ($RUNNER_LAUNCH_ERROR_DIR/rank<r>.txt); no-op outside runner launch.
void leave_error_note(int rank, const std::string& message);

}  // namespace runner
