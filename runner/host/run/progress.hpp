// What a sweep shows while it runs, as Google Benchmark and nvbench do:
//  - stderr: progress, points done/total, the current point, ETA; on a terminal one
//    updating line that also counts the seconds spent in a long point, elsewhere
//    plain lines (and a "still running" line every 30 s of one point);
//  - stdout: each point's result as it finishes (status, its main metrics), and a
//    summary table of every point at the end.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/record.hpp"
#include "runner/stored_record.hpp"

namespace runner {

// The metrics a result line shows: the step time (step_ms, else time_ms, else the
// first timed metric), then up to two rates (units ending in /s); a record with
// none of those shows its first three numbers.
std::vector<std::string> headline_metrics(const Record& record);
// "1.234 ms ±0.5%" (median and relative standard error) or "12.5 GB/s".
std::string metric_text(const Metric& metric);

class Progress {
 public:
  // total 0: print nothing (ranks other than 0).
  explicit Progress(int total, std::FILE* results = stdout, std::FILE* status = stderr);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void begin_point(int index, const std::string& label);
  // `message`: the error, or why the point was skipped.
  void end_point(RecordStatus status, const std::vector<Record>& records = {},
                 const std::string& message = "");
  void finish();

 private:
  struct Row {
    std::string label, status;
    std::vector<std::pair<std::string, std::string>> cells;  // metric -> text
  };
  void status_line(double point_seconds);
  void heartbeat();

  int total_;
  int index_ = 0;
  int done_ = 0;
  bool tty_;
  std::FILE* results_;
  std::FILE* status_;
  std::string label_;
  std::chrono::steady_clock::time_point start_, point_start_;
  std::vector<Row> rows_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool in_point_ = false, stopping_ = false;
  std::thread ticker_;
};

std::string format_duration(double seconds);

}  // namespace runner
