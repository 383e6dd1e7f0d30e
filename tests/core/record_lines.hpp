// Tests state records as results.jsonl lines (JSON) and check what a run wrote as
// lines: both go through the one codec (runner/stored_record.hpp), as the file does.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.hpp"
#include "runner/stored_record.hpp"

namespace runner::report {

inline std::vector<StoredRecord> stored(const std::vector<nlohmann::json>& lines) {
  std::vector<StoredRecord> out;
  for (const auto& line : lines) out.push_back(decode_record(line));
  return out;
}

// A results.jsonl read as the report reads it (types checked), each record as its line.
inline std::vector<nlohmann::json> read_result_lines(const std::filesystem::path& results_jsonl,
                                                     std::vector<std::string>* warnings = nullptr) {
  std::vector<nlohmann::json> lines;
  for (const StoredRecord& r : read_results(results_jsonl, warnings)) lines.push_back(encode_record(r));
  return lines;
}

// Each record of a run as a line without what differs from one run of the same points to
// another (time, environment, a rank's placement, observations, measured seconds, the echo
// task's measured sleep): two runs of one sweep, however split or spread, compare equal.
inline std::vector<std::string> comparable_records(const std::filesystem::path& results_jsonl) {
  std::vector<std::string> out;
  for (auto r : read_result_lines(results_jsonl)) {
    for (const char* key : {"time", "env", "placement", "observed", "measurement"}) r.erase(key);
    r["metrics"].erase("sleep_ms");
    out.push_back(r.dump());
  }
  return out;
}

inline BuiltTable build_table(const TableSpec& spec, const std::vector<nlohmann::json>& lines) {
  return build_table(spec, stored(lines));
}
inline nlohmann::json figure_data(const FigureSpec& spec, const std::vector<nlohmann::json>& lines) {
  return figure_data(spec, stored(lines));
}
inline std::string figure_caption(const FigureSpec& spec, const std::vector<nlohmann::json>& lines) {
  return figure_caption(spec, stored(lines));
}
inline std::vector<std::filesystem::path> write_report(const ReportSpec& spec, const std::vector<nlohmann::json>& lines,
                                                       const std::filesystem::path& reports_dir,
                                                       const RunSummary& run = {}) {
  return write_report(spec, stored(lines), reports_dir, run);
}
inline std::size_t recorded_points(const std::vector<nlohmann::json>& lines) { return recorded_points(stored(lines)); }
inline std::string run_sentence(const RunSummary& run, const std::vector<nlohmann::json>& lines) {
  return run_sentence(run, stored(lines));
}

}  // namespace runner::report
