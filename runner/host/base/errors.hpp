// The error a user can fix: the host throws it for bad input (an experiment file,
// a --set, a plugin name, a run directory) and prints its one line with exit code 2.
#pragma once
#include <stdexcept>
#include <string>

#include "runner/printable.hpp"

namespace runner {

// A one-line user error: "<where>: <key>: <what>; <fix>". Control characters
// from the input (a NUL that would cut the message, a terminal escape sequence)
// are kept visible as escapes (printable.hpp).
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& what) : std::runtime_error(printable(what)) {}
  explicit ConfigError(const char* what) : ConfigError(std::string(what)) {}
};

}  // namespace runner
