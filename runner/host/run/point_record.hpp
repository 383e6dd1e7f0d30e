// Recording a point, in one place: its parameters as a record shows them, the records of
// a finished point (point.hpp's outcome) written to results.jsonl and the run history
// (through rank 0 in a multi-process run), the single record of a point that stopped
// early (interrupted, timed out, its worker lost), and the record left behind should
// plugin code end the process during the point (output/point_guard.hpp).
#pragma once
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "config/experiment.hpp"
#include "config/sweep.hpp"
#include "output/point_guard.hpp"
#include "run/point.hpp"
#include "runner/record.hpp"
#include "runner/stored_record.hpp"

namespace runner {

struct RunOutput;  // run_output.hpp (its run history needs the history library's headers)

// The point's parameters as flat dotted keys with native JSON types.
nlohmann::json point_params_json(const Point& point, const c10::Device& device);

// One results.jsonl record of `point`, written now; `message` is the error (status
// error/oom/interrupted) or the reason (status skipped). `observed` (an object) adds
// what the host saw of the point: "measurement" (how it was measured and when it
// stopped) and "gpu" (clocks, temperature, power, throttling). Throws
// std::invalid_argument on a duplicate metric name.
StoredRecord point_record(const std::string& experiment, const Point& point, RecordStatus status,
                          const std::string& message, const Record& record, const nlohmann::json& params,
                          const nlohmann::json& env, const nlohmann::json& observed = nullptr);

// The one record of a point that stopped before it finished (status interrupted or
// timeout, with `note` saying why), appended by rank 0; other ranks write nothing.
void record_stopped_point(const ExperimentSpec& exp, const Point& point, RecordStatus status, const std::string& note,
                          const c10::Device& device, RunOutput& run);

// Writes the records of point number `point_index` of the sweep. A rank whose point
// failed (not ok, skipped or invalid) cannot wait for its peers, which may sit in a
// collective it will never join: it writes what it can and leaves (leave_peers).
void record_point(const ExperimentSpec& exp, const Point& point, int point_index, const c10::Device& device,
                  PointOutcome& outcome, RunOutput& run);

// What the run writes if plugin code ends the process during this point
// (output/point_guard.hpp); `label` names the point as log lines do.
PointDeathNote death_note(const ExperimentSpec& exp, const Point& point, const c10::Device& device,
                          const RunOutput& run, const std::string& label);

}  // namespace runner
