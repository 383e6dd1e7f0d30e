#include "run_output.hpp"

#include <cstdlib>
#include <iostream>

#include "stderr_line.hpp"

namespace runner {

void FileLogger::warn(const std::string& line) {
  write("warn", line);
  std::cerr << "warning: " << line << "\n";
}

void FileLogger::write(const char* level, const std::string& line) {
  out_ << utc_timestamp(false) << " " << level << " " << line << "\n";
  out_.flush();
}

RunOutput::RunOutput(std::filesystem::path dir, const c10::Device& device, DistributedSession* session)
    : dir(std::move(dir)), session(session), rank(session ? session->dist().rank : 0),
      log(this->dir / (rank == 0 ? std::string("log.txt") : "log.rank" + std::to_string(rank) + ".txt")),
      env(capture_environment(device)) {
  if (rank == 0) results.emplace(this->dir / "results.jsonl");
  if (session) {
    env["world_size"] = session->dist().world_size;
    env["backend"] = session->dist().backend;
  }
}

void record_point(const Experiment& exp, const Point& point, int point_index, const c10::Device& device,
                  PointOutcome& outcome, RunOutput& run) {
  const nlohmann::json params = point_params_json(point, device);
  std::vector<nlohmann::json> lines;
  try {
    for (const Record& r : outcome.records)
      lines.push_back(record_json(exp.name, point, outcome.status, outcome.message, r, params, run.env, outcome.observed.fields));
  } catch (const std::invalid_argument& e) {  // duplicate metric names
    outcome.status = "error";
    outcome.message = e.what();
    lines = {record_json(exp.name, point, outcome.status, outcome.message, Record{}, params, run.env)};
  }
  if (!run.session) {
    for (const auto& line : lines) run.results->append(line);
    if (run.history) run.history->add_point(lines);
    return;
  }
  if (outcome.status != "ok" && outcome.status != "skipped") {
    const std::string why = "rank " + std::to_string(run.rank) + ": " + point.part + " " + describe_point(point) + ": " +
                            outcome.status + ": " + outcome.message;
    if (run.rank == 0) {
      for (const auto& line : lines) run.results->append(line);
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
  for (const auto& line : merged) run.results->append(line);
  if (run.history) run.history->add_point(merged);
}

void leave_peers(RunOutput& run, const std::string& note) {
  leave_error_note(run.rank, note);
  run.session->abort();
  std::_Exit(1);
}

}  // namespace runner
