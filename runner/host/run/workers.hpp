// Points of one sweep spread over worker processes on one host: `--workers N` on the
// CPU, `--gpus 0-3|0,2|all` one worker per GPU (its points pinned there with
// CUDA_VISIBLE_DEVICES, so no two measured points share a GPU). The parent owns the
// run directory and is its only writer: it hands each idle worker the next point,
// and appends a point's records to results.jsonl (and the history) once the worker
// says it is done. A worker (`--worker-of RUN --worker-index K`, started by the
// parent only) runs the points it is given with the ordinary sweep loop, spooling
// their records into RUN/workers/K/, and names itself in each record's env.
//
// A multi-process point (`processes: N`, the experiment's or its part's) takes N of the
// pool's workers (GPUs) at once: the workers that held them end, and the point runs as
// its own `runner launch --nproc-per-node N` on them (CUDA_VISIBLE_DEVICES naming those
// N GPUs), spooling into RUN/workers/point-P/; the slots go back to the pool after it.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "config/sweep.hpp"
#include "run/run_output.hpp"

namespace runner {

// --gpus: "all" (every one of `available`), "0-3", "0,2,5"; ConfigError otherwise.
std::vector<int> parse_gpus(const std::string& text, int available);

struct PoolSpec {
  int workers = 0;                // processes
  std::vector<int> gpus;          // one per worker, empty on the CPU
  std::vector<std::string> args;  // the run's own command line (after the program name)
};

struct RunOptions;

// --workers N / --gpus LIST of a run on `device`, checked before the run directory is
// made (ConfigError); workers 0 when neither is given.
PoolSpec pool_spec(const RunOptions& options, const c10::Device& device, bool launched);

struct PoolResult {
  int failures = 0;
};

// How many processes each point runs on: its part's `processes:`, else the experiment's,
// else 1. A value that is not an integer >= 1 is a ConfigError naming the file and key.
std::vector<int> point_processes(const ExperimentSpec& exp, const std::vector<Point>& points);

// `processes:` checked against where the points run (ConfigError naming the file, key and
// fix): on a pool each point takes that many workers, so none may need more than the pool
// has; a launched run of `world_size` ranks runs every point on all of them, so a part's
// own `processes:` must equal it; a single process runs 1-process points only.
void check_point_processes(const ExperimentSpec& exp, const std::vector<Point>& points, const PoolSpec& pool,
                           int world_size);

// The points of `points` that run in one process.
std::vector<Point> one_process_points(const ExperimentSpec& exp, const std::vector<Point>& points);

// What the ranks of a pool's multi-process point learn from their environment: which
// point (its sweep position), and which of the pool's workers and GPUs they hold.
struct WorkerGroup {
  std::size_t position = 0;
  std::vector<int> slots;
  std::vector<int> gpus;  // empty on the CPU
};
std::optional<WorkerGroup> worker_group();

// Where worker `index` (or a multi-process point's ranks) spools its records.
std::filesystem::path worker_dir(const std::filesystem::path& run_dir, int index,
                                 const std::optional<WorkerGroup>& group);
// The worker's place in its records' env: `worker` (the pool slot; a rank's own one) and on
// GPUs `gpu_index`; a multi-process point's records also list all of them (`workers`,
// `gpu_indices`).
void name_worker(nlohmann::json& env, int index, const std::optional<WorkerGroup>& group, int local_rank);

// Runs every point of `points` not in `finished` on the pool, appending their records to
// `run` (results.jsonl, history); `render` writes the reports of the records so far when
// a signal stops the run. Points whose worker died mid-point get an error record.
// Points start in sweep order, each once as many workers as it needs are free.
PoolResult run_pool(const ExperimentSpec& exp, const std::vector<Point>& points, const c10::Device& device, RunOutput& run,
                    const std::set<std::pair<std::string, int>>& finished, const PoolSpec& spec,
                    const std::function<void()>& render);

// The worker side of the channel: which sweep positions to run, read from stdin in
// increasing order; "done" after each on fd 3.
class WorkerChannel {
 public:
  // True when point `position` is this worker's next one (blocks until the parent says).
  bool take(std::size_t position);
  // Reports the last point taken as done.
  void finish();

 private:
  long long next_ = -1;
  bool ran_ = false;
};

}  // namespace runner
