#include "run/point_record.hpp"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "base/stderr_line.hpp"
#include "output/environment.hpp"
#include "run/run_output.hpp"
#include "runner/printable.hpp"

namespace runner {
namespace {

nlohmann::json value_json(const Value& v) {
  struct Visitor {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(bool b) const { return b; }
    nlohmann::json operator()(std::int64_t i) const { return i; }
    nlohmann::json operator()(double d) const { return d; }
    nlohmann::json operator()(const std::string& s) const { return s; }
    nlohmann::json operator()(const Value::List& l) const {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : l) a.push_back(value_json(e));
      return a;
    }
    nlohmann::json operator()(const std::shared_ptr<Params>& p) const { return p ? p->plugin_name() : ""; }
  };
  return std::visit(Visitor{}, v.data);
}

void flatten_into(const Params& params, const std::string& prefix, nlohmann::json& out) {
  for (const auto& [key, value] : params.values()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    out[path] = value_json(value);
    if (const auto* p = std::get_if<std::shared_ptr<Params>>(&value.data); p && *p) flatten_into(**p, path, out);
  }
}

}  // namespace

nlohmann::json point_params_json(const Point& point, const c10::Device& device) {
  nlohmann::json out = nlohmann::json::object();
  flatten_into(point.params, "", out);
  out["precision"] = point.precision.name;
  out["seed"] = point.seed;
  out["device"] = device.is_cuda() ? "cuda" : "cpu";
  out["measure.warmup_steps"] = point.measure.warmup_steps;
  if (point.measure.warmup_seconds > 0) out["measure.warmup_seconds"] = point.measure.warmup_seconds;
  out["measure.measured_steps"] = point.measure.measured_steps;
  out["measure.sync_each_step"] = point.measure.sync_each_step;
  if (point.measure.hold_stream) out["measure.hold_stream"] = true;
  out["measure.target_rel_stderr"] = point.measure.target_rel_stderr;
  if (point.measure.adaptive()) {
    out["measure.min_steps"] = point.measure.min_steps;
    out["measure.max_steps"] = point.measure.max_steps;
    out["measure.max_seconds"] = point.measure.max_seconds;
  }
  out["measure.repetitions"] = point.measure.repetitions;
  out["measure.cache"] = point.measure.cache;
  // Only when set: records of points under the default compare equal to older ones.
  if (point.timeout_s != kDefaultPointTimeoutS) out["measure.timeout_s"] = point.timeout_s;
  return out;
}

StoredRecord point_record(const std::string& experiment, const Point& point, RecordStatus status,
                          const std::string& message, const Record& record, const nlohmann::json& params,
                          const nlohmann::json& env, const nlohmann::json& observed) {
  StoredRecord r;
  try {
    r = stored_record(record);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(e.what() + std::string(" of ") + point.part + "[" + std::to_string(point.index) + "]");
  }
  r.experiment = experiment;
  r.part = point.part;
  r.point = point.index;
  r.task = point.task;
  r.status = status;
  r.message = message;
  r.params = params;
  if (observed.is_object()) r.observed = observed;
  r.env = env;
  r.time = utc_timestamp(false);
  return r;
}

void record_stopped_point(const ExperimentSpec& exp, const Point& point, RecordStatus status, const std::string& note,
                          const c10::Device& device, RunOutput& run) {
  if (run.results)
    run.results->append_point({point_record(exp.name, point, status, note, Record{}, point_params_json(point, device),
                                            run.env)});
}

void record_point(const ExperimentSpec& exp, const Point& point, int point_index, const c10::Device& device,
                  PointOutcome& outcome, RunOutput& run) {
  const nlohmann::json params = point_params_json(point, device);
  std::vector<StoredRecord> lines;
  try {
    for (const Record& r : outcome.records)
      lines.push_back(point_record(exp.name, point, outcome.status, outcome.message, r, params, run.env,
                                   outcome.observed.fields));
  } catch (const std::invalid_argument& e) {  // duplicate metric names
    outcome.status = RecordStatus::error;
    outcome.message = e.what();
    lines = {point_record(exp.name, point, outcome.status, outcome.message, Record{}, params, run.env)};
  }
  if (!run.session) {
    run.results->append_point(lines);
    if (run.history) run.history->add_point(lines);
    return;
  }
  // An invalid point finished its collectives like an ok one: the ranks still agree.
  if (outcome.status != RecordStatus::ok && outcome.status != RecordStatus::skipped &&
      outcome.status != RecordStatus::invalid) {
    const std::string why = "rank " + std::to_string(run.rank) + ": " + point.part + " " + describe_point(point) + ": " +
                            status_name(outcome.status) + ": " + outcome.message;
    if (run.rank == 0) {
      run.results->append_point(lines);
    } else {
      run.session->send_records(point_index, lines);
    }
    write_stderr_line("runner: " + why);
    leave_peers(run, why);
  }
  if (run.rank != 0) {
    run.session->send_records(point_index, lines);
    return;
  }
  const auto merged = merge_rank_records(run.session->gather_records(point_index, std::move(lines)));
  run.results->append_point(merged);
  if (run.history) run.history->add_point(merged);
}

PointDeathNote death_note(const ExperimentSpec& exp, const Point& point, const c10::Device& device, const RunOutput& run,
                          const std::string& label) {
  PointDeathNote note;
  if (run.results) note.results_file = (run.dir / "results.jsonl").string();
  note.log_file = log_file_of(run.dir, run.rank).string();
  if (const char* dir = std::getenv("RUNNER_LAUNCH_ERROR_DIR"); dir && run.session)
    note.note_file = std::string(dir) + "/rank" + std::to_string(run.rank) + ".txt";
  std::vector<StoredRecord> death = {point_record(exp.name, point, RecordStatus::error, kDeathPlaceholder, Record{},
                                                  point_params_json(point, device), run.env)};
  mark_point_records(death);  // a point of one record, written in one write(2)
  note.record_json = record_line(death.front());
  note.label = printable((run.session ? "rank " + std::to_string(run.rank) + ": " : std::string()) + label);
  note.after = "; the run stopped here (records so far: " + (run.dir / "results.jsonl").string() + "; " +
               run.resume_hint + ")";
  return note;
}

}  // namespace runner
