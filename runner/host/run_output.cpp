#include "run_output.hpp"

#include <cstdlib>
#include <iostream>
#include <set>

#include "printable.hpp"
#include "stderr_line.hpp"

namespace runner {

void FileLogger::warn(const std::string& line) {
  write("warn", line);
  std::cerr << "warning: " << printable(line) << "\n";
}

void FileLogger::write(const char* level, const std::string& line) {
  out_ << utc_timestamp(false) << " " << level << " " << line << "\n";
  out_.flush();
}

RunOutput::RunOutput(std::filesystem::path dir, const c10::Device& device, DistributedSession* session)
    : dir(std::move(dir)), session(session), rank(session ? session->dist().rank : 0),
      log(log_file_of(this->dir, rank)),
      env(capture_environment(device)) {
  if (rank == 0) results.emplace(this->dir / "results.jsonl");
  if (session) {
    env["world_size"] = session->dist().world_size;
    env["backend"] = session->dist().backend;
  }
}

std::filesystem::path log_file_of(const std::filesystem::path& dir, int rank) {
  return dir / (rank == 0 ? std::string("log.txt") : "log.rank" + std::to_string(rank) + ".txt");
}

namespace {

// A shell word: as is when plain, else single-quoted.
std::string shell_word(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%") ==
                           std::string::npos)
    return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string resume_hint(const ExperimentSpec& exp, const std::vector<std::string>& overrides, bool smoke,
                        const std::string& device, const std::filesystem::path& dir) {
  std::string command = "runner " + shell_word(exp.file.string());
  for (const auto& o : overrides) command += " --set " + shell_word(o);
  if (smoke) command += " --smoke";
  if (!device.empty()) command += " --device " + shell_word(device);
  return "continue with: " + command + " --resume " + shell_word(dir.string());
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

std::map<std::string, std::filesystem::path> plugin_files(const std::vector<Point>& points,
                                                          const PluginRegistry& registry) {
  std::set<std::pair<PluginKind, std::string>> used;
  for (const Point& p : points) {
    used.emplace(PluginKind::Task, p.task);
    for (const Params& profiler : p.profilers) used.emplace(PluginKind::Profiler, profiler.plugin_name());
  }
  std::map<std::string, std::filesystem::path> files;
  for (const auto& loaded : registry.plugins())
    if (used.count({loaded.manifest->kind, loaded.manifest->name}))
      files[std::string(to_string(loaded.manifest->kind)) + "/" + loaded.manifest->name] = loaded.file;
  return files;
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

void leave_peers(RunOutput& run, const std::string& note) {
  leave_error_note(run.rank, note);
  run.session->abort();
  std::_Exit(1);
}

}  // namespace runner
