// Reading measured values out of another experiment's results.jsonl (for analytic tasks:
// task/accounting, task/scaling_model), so an
// analytic value can stand next to the measurement it predicts.
//
// A selection names the file, optionally a part, and `key=value` conditions on a
// record's params or labels; `{option}` in a value is replaced by this point's own
// option (dotted path, e.g. {model.context_length}), so one selection follows a
// sweep; `key=` asks for the key to be absent (the aggregate record of a
// multi-process run has no `rank` label). Numbers compare by value (16 == 16.0).
// Every mistake throws std::invalid_argument with one line naming the file, the
// option and the fix.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/stored_record.hpp"

namespace runner {

struct RecordSelection {
  std::filesystem::path file;
  std::string part;                                         // empty: any part
  std::vector<std::pair<std::string, std::string>> where;  // after substitution
};

// "key=value" entries with {option} replaced from `options` (Params::flatten()).
std::vector<std::pair<std::string, std::string>> parse_where(const std::vector<std::string>& entries,
                                                             const std::map<std::string, std::string>& options,
                                                             const std::string& option_name);

// One matched record: its status and its metrics as JSON text-free values.
struct MeasuredRecord {
  RecordStatus status = RecordStatus::ok;
  std::string status_text = "ok";          // as recorded: ok, oom, skipped, error, ...
  std::map<std::string, double> numbers;   // scalar metrics, and stats reduced by `stat`
  std::map<std::string, std::string> units;
};

// The one record the selection matches; throws when none or several do.
MeasuredRecord find_measured(const RecordSelection& selection, const std::string& stat);

// All records the selection matches (for fits over a sweep); throws when none do.
std::vector<MeasuredRecord> find_all_measured(const RecordSelection& selection, const std::string& stat);

}  // namespace runner
