// Where one run writes: its directory, results.jsonl (rank 0), the run history, each
// rank's log, the environment every record carries and how to resume it. Recording a
// point into it is point_record.hpp.
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

#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "distributed/distributed.hpp"
#include "history/run_recorder.hpp"
#include "output/results_writer.hpp"
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

// What starts a stopped run again besides its file and --resume: the same --set, --smoke and
// --device (a different resolved config is refused), and how it ran.
struct ResumeCommand {
  std::vector<std::string> overrides;
  bool smoke = false;
  std::string device;
  int ranks_per_node = 0;   // > 0: the ranks of `runner launch --nproc-per-node N` (each skips what rank 0 recorded)
  bool more_nodes = false;  // that launch spans nodes: their --nnodes flags too
  std::string shard;        // "I/N": a shard resumes only as itself
  std::string pool;         // "--workers N" or "--gpus LIST"
};
// The command line that finishes the run, as one sentence for the log and stderr.
std::string resume_hint(const ExperimentSpec& exp, const ResumeCommand& how, const std::filesystem::path& dir);

// Leaves a multi-process run for good: the launcher's note, the process group
// aborted, exit code 1 (the launcher then stops the other ranks).
[[noreturn]] void leave_peers(RunOutput& run, const std::string& note);

}  // namespace runner
