#include "output/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "output/environment.hpp"
#include "report/report.hpp"

namespace runner {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string stored_document(const std::string& config_text) {
  size_t at = 0;
  while (at < config_text.size() && config_text[at] == '#') {
    const size_t nl = config_text.find('\n', at);
    at = nl == std::string::npos ? config_text.size() : nl + 1;
  }
  std::string doc = config_text.substr(at);
  while (!doc.empty() && doc.back() == '\n') doc.pop_back();
  return doc;
}

namespace {

// First line where two texts differ, for the refusal message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string lx, ly;
  for (int line = 1;; ++line) {
    const bool more_x = static_cast<bool>(std::getline(x, lx)), more_y = static_cast<bool>(std::getline(y, ly));
    if (!more_x && !more_y) return "";
    if (!more_x || !more_y || lx != ly)
      return "run has '" + (more_x ? lx : std::string("(end)")) + "', now '" + (more_y ? ly : std::string("(end)")) + "'";
  }
}

// Cuts a point the run did not finish writing (and a torn last line) off the end,
// so the points appended now follow the last whole one.
void drop_unfinished_point(const std::filesystem::path& results) {
  std::error_code ec;
  if (!std::filesystem::exists(results, ec)) return;
  std::uintmax_t keep = 0;
  try {
    keep = whole_points_length(results);
  } catch (const std::exception& e) {
    throw ConfigError("--resume: " + std::string(e.what()) + "; the run's records are damaged, start a new run");
  }
  if (keep < std::filesystem::file_size(results)) std::filesystem::resize_file(results, keep);
}

// The pid holding a flock on the file with this inode, from /proc/locks
// ("1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"); 0 when not found.
long lock_holder(const struct stat& file) {
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, device;
    long pid = 0;
    if (!(fields >> number >> kind >> mode >> access >> pid >> device) || kind != "FLOCK") continue;
    const size_t colon = device.rfind(':');
    if (colon != std::string::npos && device.substr(colon + 1) == std::to_string(file.st_ino)) return pid;
  }
  return 0;
}

}  // namespace

std::shared_ptr<const int> lock_run_directory(const std::filesystem::path& dir, const std::string& what) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw ConfigError(what + " " + dir.string() + ": cannot open the run directory (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    struct stat st {};
    const long holder = ::fstat(fd, &st) == 0 ? lock_holder(st) : 0;
    ::close(fd);
    throw ConfigError(what + " " + dir.string() + ": another runner is writing this run directory (" +
                      (holder > 0 ? "pid " + std::to_string(holder) : std::string("its pid is unknown")) +
                      "); wait for it to finish or stop it, then --resume");
  }
  // Closing the descriptor releases the lock; a child never inherits it (O_CLOEXEC).
  return std::shared_ptr<const int>(new int(fd), [](const int* held) {
    ::close(*held);
    delete held;
  });
}

RunDirectory prepare_run_directory(const ExperimentSpec& exp, const std::vector<std::string>& overrides, bool smoke,
                                   const std::filesystem::path& out, const std::filesystem::path& resume,
                                   const std::optional<Shard>& shard) {
  namespace fs = std::filesystem;
  std::error_code ec;
  RunDirectory run;
  const std::string& resolved = exp.resolved;
  if (!resume.empty()) {
    const fs::path config = resume / "config.yaml";
    if (!fs::exists(config, ec))
      throw ConfigError("--resume " + resume.string() + ": not a run directory (no config.yaml)");
    if (const std::optional<Shard> stored = shard_of_run(resume); stored != shard)
      throw ConfigError("--resume " + resume.string() + ": the run is " +
                        (stored ? "shard " + stored->text() : std::string("not a shard")) + ", not " +
                        (shard ? "shard " + shard->text() : std::string("the whole sweep")) + "; resume it with " +
                        (stored ? "--shard " + stored->text() : std::string("no --shard")));
    run.lock = lock_run_directory(resume, "--resume");
    // A resumed run truncates and appends to these files: never through a link
    // to some other file.
    for (const char* name : {"config.yaml", "results.jsonl", "log.txt"}) {
      const auto status = fs::symlink_status(resume / name, ec);
      if (ec || !fs::exists(status)) continue;
      if (fs::is_symlink(status) || !fs::is_regular_file(status))
        throw ConfigError("--resume " + resume.string() + ": " + name + " is " +
                          (fs::is_symlink(status) ? "a symbolic link" : "not a regular file") +
                          "; a run directory holds its own files (copy the run to a new directory first)");
    }
    for (const char* name : {"reports", "artifacts"})  // written into too: the run's own folders
      if (fs::is_symlink(fs::symlink_status(resume / name, ec)))
        throw ConfigError("--resume " + resume.string() + ": " + name +
                          " is a symbolic link; a run directory holds its own files (copy the run to a new "
                          "directory first)");
    const std::string stored = stored_document(read_text(config));
    if (stored != resolved)
      throw ConfigError("--resume " + resume.string() + ": the resolved config differs from " + config.string() +
                        " (" + first_difference(stored, resolved) +
                        "); resume with the same experiment file, --set and --smoke as the run");
    drop_unfinished_point(resume / "results.jsonl");
    run.path = resume;
    run.resumed = true;
    run.finished = finished_points(resume / "results.jsonl");
    fs::create_directories(resume / "artifacts");
    return run;
  }
  run.path = out;
  if (run.path.empty()) {
    const fs::path base = fs::path("runs") / exp.name / utc_timestamp(true);
    run.path = base;
    for (int n = 2; fs::exists(run.path, ec); ++n) run.path = base.string() + "-" + std::to_string(n);
  } else if (fs::exists(run.path, ec) && (!fs::is_directory(run.path, ec) || !fs::is_empty(run.path, ec))) {
    // Never mix two runs' records, nor overwrite anything already there.
    throw ConfigError("--out " + run.path.string() + ": exists and is not empty; a run needs a new (or empty) "
                      "directory, so nothing in it is overwritten");
  }
  const bool existed = fs::exists(run.path, ec);
  fs::create_directories(run.path, ec);
  if (ec) throw ConfigError("--out " + run.path.string() + ": cannot create the run directory (" + ec.message() + ")");
  run.lock = lock_run_directory(run.path, "--out");
  // Two runs given one --out may both have found it empty: the one that locked it
  // first owns it, the other stops here.
  if (fs::exists(run.path / "config.yaml", ec))
    throw ConfigError("--out " + run.path.string() + ": another run has just started in this directory; a run "
                      "needs a new (or empty) directory");
  fs::create_directories(run.path / "artifacts", ec);
  if (ec) throw ConfigError("--out " + run.path.string() + ": cannot create the run directory (" + ec.message() + ")");
  // Written whole or not at all: a full disk must not leave an empty config.yaml
  // (a run directory that --resume and report would misread).
  const fs::path partial = run.path / "config.yaml.partial";
  errno = 0;
  std::ofstream config(partial);
  config << config_header(exp.file, smoke) << (shard ? shard_header(*shard) : "");
  for (const auto& o : overrides) config << "# --set " << o << "\n";
  config << resolved << "\n";
  config.flush();
  const int error = errno;
  const bool written = static_cast<bool>(config);
  config.close();
  if (!written || std::rename(partial.c_str(), (run.path / "config.yaml").c_str()) != 0) {
    const std::string why = std::strerror(error ? error : errno);
    fs::remove(partial, ec);
    fs::remove(run.path / "artifacts", ec);
    if (!existed) fs::remove(run.path, ec);
    throw ConfigError(run.path.string() + "/config.yaml: cannot write (" + why +
                      "); nothing was run. Free space or choose another directory with --out");
  }
  return run;
}

std::set<std::pair<std::string, int>> finished_points(const std::filesystem::path& results_jsonl) {
  std::set<std::pair<std::string, int>> done;
  if (!std::filesystem::exists(results_jsonl)) return done;
  std::vector<std::string> warnings;
  for (const StoredRecord& record : read_records(results_jsonl, RecordTypes::checked, &warnings)) {
    // A point that did not finish (interrupted, timed out, failed) runs again; records
    // read later supersede its earlier ones (read_records).
    if (record.status == RecordStatus::interrupted || record.status == RecordStatus::error ||
        record.status == RecordStatus::timeout || !record.point)
      continue;
    done.emplace(record.part, static_cast<int>(*record.point));
  }
  return done;
}

}  // namespace runner
