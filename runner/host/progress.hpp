// Sweep progress on stderr: points done/total, the current point, ETA. One
// updating line on a terminal, plain lines otherwise (logs, CI).
#pragma once
#include <chrono>
#include <string>

namespace runner {

class Progress {
 public:
  explicit Progress(int total);
  void begin_point(int index, const std::string& label);
  void end_point(const std::string& status);
  void finish();

 private:
  int total_;
  int done_ = 0;
  bool tty_;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);

}  // namespace runner
