// Where one run writes, and how a point's records get there. A single process
// appends them to results.jsonl and the run history itself. In a multi-process
// run every rank sends them to rank 0, which merges them (merge_rank_records) and
// alone writes; each rank keeps its own log.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "experiment_spec.hpp"
#include "distributed.hpp"
#include "history/run_recorder.hpp"
#include "point.hpp"
#include "point_guard.hpp"
#include "registry.hpp"
#include "results.hpp"
#include "runner/context.hpp"

namespace runner {

// The run's log.txt (log.rank<r>.txt on other ranks); warnings also go to stderr.
class FileLogger : public Logger {
 public:
  explicit FileLogger(const std::filesystem::path& file) : out_(file, std::ios::app) {}
  void info(const std::string& line) override { write("info", line); }
  void warn(const std::string& line) override;

 private:
  void write(const char* level, const std::string& line);
  std::ofstream out_;
};

struct RunOutput {
  RunOutput(std::filesystem::path dir, const c10::Device& device, DistributedSession* session);
  std::filesystem::path dir;
  DistributedSession* session;  // null in a single-process run
  int rank;
  FileLogger log;
  std::optional<ResultsWriter> results;  // rank 0 only
  nlohmann::json env;
  std::unique_ptr<history::RunRecorder> history;  // each point's records also go to the run history
  std::string resume_hint;                         // how to finish the run if it stops (resume_hint())
};

// log.txt, or log.rank<r>.txt on rank r > 0.
std::filesystem::path log_file_of(const std::filesystem::path& dir, int rank);

// How to finish a run that stopped: the same file, --set, --smoke and --device
// (a different resolved config is refused).
std::string resume_hint(const ExperimentSpec& exp, const std::vector<std::string>& overrides, bool smoke,
                        const std::string& device, const std::filesystem::path& dir);

// What the run writes if plugin code ends the process during this point
// (point_guard.hpp); `label` names the point as log lines do.
PointDeathNote death_note(const ExperimentSpec& exp, const Point& point, const c10::Device& device, const RunOutput& run,
                          const std::string& label);

// The files of the task and profiler plugins the points use, by kind/name.
std::map<std::string, std::filesystem::path> plugin_files(const std::vector<Point>& points,
                                                          const PluginRegistry& registry);

// Writes the records of point number `point_index` of the sweep. A rank whose point
// failed (not ok, skipped or invalid) cannot wait for its peers, which may sit in a
// collective it will never join: it writes what it can and leaves (leave_peers).
void record_point(const ExperimentSpec& exp, const Point& point, int point_index, const c10::Device& device,
                  PointOutcome& outcome, RunOutput& run);

// Leaves a multi-process run for good: the launcher's note, the process group
// aborted, exit code 1 (the launcher then stops the other ranks).
[[noreturn]] void leave_peers(RunOutput& run, const std::string& note);

}  // namespace runner
