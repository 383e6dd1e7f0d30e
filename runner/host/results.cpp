#include "results.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <torch/version.h>

#include "runner/device.hpp"

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

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

std::string command_output(const char* cmd) {
  std::array<char, 256> buf{};
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd, "r"), pclose);
  if (!pipe) return out;
  while (fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string nvidia_driver_version() {
  // "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64  580.159.04  Release Build ..."
  std::ifstream in("/proc/driver/nvidia/version");
  std::string word;
  while (in >> word) {
    if (word.find('.') != std::string::npos && word.find_first_not_of("0123456789.") == std::string::npos)
      return word;
  }
  return "";
}

}  // namespace

std::string utc_timestamp(bool for_path) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, for_path ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The commit of the git repository at `dir` (its working tree, "-dirty" when
// tracked files changed), or "" outside one.
std::string commit_of(const std::string& dir) {
  const std::string git = "git -C " + shell_quoted(dir) + " ";
  std::string commit = command_output((git + "rev-parse --short=12 HEAD 2>/dev/null").c_str());
  if (!commit.empty() && !command_output((git + "status --porcelain --untracked-files=no 2>/dev/null").c_str()).empty())
    commit += "-dirty";
  return commit;
}

// The commit a plugin file was built from: its own checkout's, except that a plugin built in
// the runner's tree (the same repository, or no repository at all under the runner's source
// directory) has the runner's commit, which RUNNER_GIT_COMMIT names where the tree is a copy
// whose .git is stale or gone (a build host that received the files only).
std::string plugin_commit(const std::filesystem::path& file) {
  const std::string dir = file.parent_path().string();
  const char* given = std::getenv("RUNNER_GIT_COMMIT");
  if (given && *given) {
    auto toplevel = [](const std::string& d) {
      return command_output(("git -C " + shell_quoted(d) + " rev-parse --show-toplevel 2>/dev/null").c_str());
    };
    const std::string top = toplevel(dir);
    std::error_code ec;
    const std::string source = std::filesystem::weakly_canonical(RUNNER_SOURCE_DIR, ec).string() + "/";
    const bool in_tree = top.empty() ? std::filesystem::weakly_canonical(file, ec).string().rfind(source, 0) == 0
                                     : top == toplevel(RUNNER_SOURCE_DIR);
    if (in_tree) return given;
  }
  return commit_of(dir);
}

nlohmann::json plugin_commits(const std::map<std::string, std::filesystem::path>& plugin_files) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, file] : plugin_files) {
    const std::string commit = plugin_commit(file);
    if (!commit.empty()) out[name] = commit;
  }
  return out;
}

nlohmann::json plugin_identities(const std::map<std::string, std::filesystem::path>& plugin_files) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, file] : plugin_files) {
    nlohmann::json p = {{"file", file.string()}};
    const std::string sum = command_output(("sha256sum " + shell_quoted(file.string()) + " 2>/dev/null").c_str());
    if (sum.size() >= 64) p["sha256"] = sum.substr(0, 64);
    if (const std::string commit = plugin_commit(file); !commit.empty()) p["commit"] = commit;
    out[name] = p;
  }
  return out;
}

nlohmann::json capture_environment(const c10::Device& device) {
  nlohmann::json env;
  env["device"] = device.is_cuda() ? "cuda" : "cpu";
  if (device.is_cuda()) env["gpu"] = device_name(device);
  else env["cpu"] = device_name(device);
  env["libtorch"] = TORCH_VERSION;
#ifdef RUNNER_WITH_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    env["cuda_runtime"] = std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
  if (const std::string driver = nvidia_driver_version(); !driver.empty()) env["driver"] = driver;
#endif
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  env["host"] = host;
  // The commit of the runner's own source tree, wherever the run starts from (a
  // run started in another checkout must not record that checkout's commit);
  // RUNNER_GIT_COMMIT names it where the tree is a copy without .git (a CI checkout),
  // and the commit baked in at configure time stands in when the tree is gone.
  const char* given = std::getenv("RUNNER_GIT_COMMIT");
  std::string commit = given ? given : commit_of(RUNNER_SOURCE_DIR);
  if (commit.empty()) commit = RUNNER_GIT_COMMIT;
  env["git_commit"] = commit;
  env["runner_version"] = RUNNER_VERSION;
  return env;
}

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

ResultsWriter::ResultsWriter(const std::filesystem::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + file.string() + " for writing: " + std::strerror(errno));
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void mark_point_records(std::vector<StoredRecord>& records) {
  const auto n = static_cast<std::int64_t>(records.size());
  for (std::int64_t i = 0; i < n; ++i) records[static_cast<size_t>(i)].point_record.emplace(i + 1, n);
}

void ResultsWriter::append_point(std::vector<StoredRecord> records) {
  mark_point_records(records);
  std::string text;
  for (const StoredRecord& r : records) text += record_line(r) + '\n';
  struct stat before {};
  const bool sized = ::fstat(fd_, &before) == 0;
  const char* at = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
      // Only this process appends (the run directory is locked): what it wrote of
      // the point is cut off again. Should that fail too, the point is torn, which
      // every reader skips.
      if (sized) {
        [[maybe_unused]] const int cut = ::ftruncate(fd_, before.st_size);
      }
      throw std::runtime_error("writing " + file_.string() + " failed (" + why + "; disk full?)");
    }
    at += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace runner
