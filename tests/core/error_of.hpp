// The message of the config or report-spec error a call throws, for tests that check how
// a bad experiment is named (file:line, key, fix).
#pragma once
#include <functional>
#include <string>

#include "base/errors.hpp"
#include "report/report.hpp"

namespace runner::testing {

// "(no error)" when `fn` throws nothing; any other exception fails the test uncaught.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const report::SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace runner::testing
