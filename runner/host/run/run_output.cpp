#include "run/run_output.hpp"

#include <cstdlib>
#include <iostream>

#include "output/environment.hpp"
#include "runner/printable.hpp"

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

std::string resume_hint(const ExperimentSpec& exp, const ResumeCommand& how, const std::filesystem::path& dir) {
  std::string command = "runner ";
  if (how.ranks_per_node > 0)
    command += "launch --nproc-per-node " + std::to_string(how.ranks_per_node) +
               (how.more_nodes ? " (and the same --nnodes flags) " : " ");
  command += shell_word(exp.file.string());
  for (const auto& o : how.overrides) command += " --set " + shell_word(o);
  if (how.smoke) command += " --smoke";
  if (!how.device.empty()) command += " --device " + shell_word(how.device);
  if (!how.shard.empty()) command += " --shard " + how.shard;
  if (!how.pool.empty()) command += " " + how.pool;
  return "continue with: " + command + " --resume " + shell_word(dir.string());
}

void leave_peers(RunOutput& run, const std::string& note) {
  leave_error_note(run.rank, note);
  run.session->abort();
  std::_Exit(1);
}

}  // namespace runner
