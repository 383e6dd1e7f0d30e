#pragma once
// One message, one write(2): the launcher and its ranks share a stderr, and
// std::cerr's per-insertion flushes let their lines interleave mid-sentence.
#include <unistd.h>

#include <cerrno>
#include <string>

#include "runner/printable.hpp"

namespace runner {

// The line's control characters are shown as escapes (printable.hpp): a name
// or a plugin's message must not drive the terminal.
inline void write_stderr_line(std::string line) {
  line = printable(line, true);
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
