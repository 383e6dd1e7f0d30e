// The error a user can fix: the host throws it for bad input (an experiment file,
// a --set, a plugin name, a run directory) and prints its one line with exit code 2.
#pragma once
#include <stdexcept>

namespace runner {

// A one-line user error: "<where>: <key>: <what>; <fix>".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace runner
