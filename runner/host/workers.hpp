// Points of one sweep spread over worker processes on one host: `--workers N` on the
// CPU, `--gpus 0-3|0,2|all` one worker per GPU (its points pinned there with
// CUDA_VISIBLE_DEVICES, so no two measured points share a GPU). The parent owns the
// run directory and is its only writer: it hands each idle worker the next point,
// and appends a point's records to results.jsonl (and the history) once the worker
// says it is done. A worker (`--worker-of RUN --worker-index K`, started by the
// parent only) runs the points it is given with the ordinary sweep loop, spooling
// their records into RUN/workers/K/, and names itself in each record's env.
#pragma once
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "experiment_spec.hpp"
#include "run_output.hpp"
#include "sweep.hpp"

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

// Runs every point of `points` not in `finished` on the pool, appending their records to
// `run` (results.jsonl, history); `render` writes the reports of the records so far when
// a signal stops the run. Points whose worker died mid-point get an error record.
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
