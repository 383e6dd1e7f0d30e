// results.jsonl: one JSON object per record; a point's records are appended in one
// write, each marked "point_record": [i, n], so a crash mid-sweep keeps every
// finished point and readers skip a point cut off while being written.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/record.hpp"
#include "runner/stored_record.hpp"
#include "sweep.hpp"

namespace runner {

// Environment of this process: device, GPU, driver, CUDA, LibTorch, host, git commit.
nlohmann::json capture_environment(const c10::Device& device);

// {"task/echo": "<commit>", ...}: the commit of the git repository each plugin file
// lies in (a plugin built in the runner's tree has the runner's; one built in its own
// repository, that one's); plugins outside any repository are left out.
nlohmann::json plugin_commits(const std::map<std::string, std::filesystem::path>& plugin_files);
// {"task/echo": {"sha256": "<content hash>", "file": "...", "commit": "..."}}: what
// each plugin .so the run loaded is, in-tree or not, so a rebuilt plugin (same
// commit or none) still shows as changed code in the history and in compares.
nlohmann::json plugin_identities(const std::map<std::string, std::filesystem::path>& plugin_files);

// The point's parameters as flat dotted keys with native JSON types.
nlohmann::json point_params_json(const Point& point, const c10::Device& device);

// One results.jsonl record of `point`, written now; `message` is the error (status
// error/oom/interrupted) or the reason (status skipped). `observed` (an object) adds
// what the host saw of the point: "measurement" (how it was measured and when it
// stopped) and "gpu" (clocks, temperature, power, throttling). Throws
// std::invalid_argument on a duplicate metric name.
StoredRecord point_record(const std::string& experiment, const Point& point, RecordStatus status,
                          const std::string& message, const Record& record, const nlohmann::json& params,
                          const nlohmann::json& env, const nlohmann::json& observed = nullptr);

class ResultsWriter {
 public:
  explicit ResultsWriter(const std::filesystem::path& file);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  // One point's records, each marked with its point_record, in one write; text that
  // is not UTF-8 is replaced by U+FFFD, never lost. A failed write (disk full) is
  // cut back off the file, so no part of the point stays, and throws.
  void append_point(std::vector<StoredRecord> records);

 private:
  int fd_ = -1;
  std::filesystem::path file_;
};

// `records` marked as one point's, each with its point_record [i, n].
void mark_point_records(std::vector<StoredRecord>& records);

std::string utc_timestamp(bool for_path);

}  // namespace runner
