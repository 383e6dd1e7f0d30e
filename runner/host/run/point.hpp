// One point's life: the task runs inside the point's profilers (their hooks timed),
// its exceptions become a status, the GPU is sampled around it, and a point that
// failed still leaves one record (with the profilers' summary) so its table cell
// says why.
#pragma once
#include <string>
#include <vector>

#include "config/sweep.hpp"
#include "run/observation.hpp"
#include "runner/context.hpp"
#include "runner/record.hpp"
#include "runner/stored_record.hpp"

namespace runner {

struct PointOutcome {
  RecordStatus status = RecordStatus::ok;  // ok | oom | error | skipped | invalid | timeout
  std::string message;        // the error, or why the point was skipped
  bool device_fault = false;  // the device is unusable: end the sweep
  std::vector<Record> records;
  Observation observed;  // how it was measured, what the GPU did
};

// Runs `point` with its profilers in `ctx`, the point's own Context. A point whose
// task records lack one of `required` (required_metrics, config/report_spec_check.hpp) is invalid.
PointOutcome run_point(const Point& point, Context& ctx, const std::vector<std::string>& required = {});

}  // namespace runner
