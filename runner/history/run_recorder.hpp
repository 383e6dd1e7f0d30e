// The run's side of the history: execute.cpp opens one per run and hands it each
// point's records. A history that cannot be written at all (a read-only mount) is
// refused before the run starts (check_writable, store.hpp); one that fails later (locked,
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

class RunRecorder {
 public:
  // file: resolve_history_path's answer (store.hpp); empty: the history is off.
  RunRecorder(const std::filesystem::path& file, const std::string& experiment, const std::filesystem::path& run_dir,
              const nlohmann::json& env, bool smoke);
  ~RunRecorder();
  void add_point(const std::vector<StoredRecord>& records);
  void finish();

 private:
  void disable(const std::string& why);
  std::unique_ptr<HistoryStore> store_;
  std::int64_t run_id_ = 0;
};

}  // namespace runner::history
