#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace runner {

std::string format_duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

Progress::Progress(int total)
    : total_(total), tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void Progress::begin_point(int index, const std::string& label) {
  label_ = label;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string eta = done_ > 0 ? format_duration(elapsed / done_ * (total_ - done_)) : "?";
  if (tty_) {
    std::fprintf(stderr, "\r\033[K[%d/%d] %s  (ETA %s)", index + 1, total_, label.c_str(), eta.c_str());
  } else {
    std::fprintf(stderr, "[%d/%d] %s  (ETA %s)\n", index + 1, total_, label.c_str(), eta.c_str());
  }
  std::fflush(stderr);
}

void Progress::end_point(const std::string& status) {
  ++done_;
  if (status != "ok") {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "  %s: %s\n", label_.c_str(), status.c_str());
  }
}

void Progress::finish() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%d points in %s\n", done_, format_duration(elapsed).c_str());
}

}  // namespace runner
