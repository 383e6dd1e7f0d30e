// The run's side of the history: execute.cpp opens one per run and hands it each
// point's records. A history that cannot be written at all (a read-only mount) is
// refused before the run starts (check_writable); one that fails later (locked,
// a full disk) costs a warning, never the run (results.jsonl stays the record of truth).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/stored_record.hpp"

namespace runner::history {

class HistoryStore;

// Throws std::runtime_error naming the history file, why it cannot be written and
// the fix; nothing when the history is off or writable.
void check_writable(const std::string& flag, const std::string& config_value);

class RunRecorder {
 public:
  // flag: --history; config_value: the experiment's `history:` key.
  RunRecorder(const std::string& flag, const std::string& config_value, const std::string& experiment,
              const std::filesystem::path& run_dir, const nlohmann::json& env, bool smoke);
  ~RunRecorder();
  void add_point(const std::vector<StoredRecord>& records);
  void finish();

 private:
  void disable(const std::string& why);
  std::unique_ptr<HistoryStore> store_;
  std::int64_t run_id_ = 0;
};

}  // namespace runner::history
