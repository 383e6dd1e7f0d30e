#pragma once
// One message, one write(2): the launcher and its ranks share a stderr, and
// std::cerr's per-insertion flushes let their lines interleave mid-sentence.
#include <unistd.h>

#include <cerrno>
#include <string>

namespace runner {

inline void write_stderr_line(std::string line) {
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace runner
