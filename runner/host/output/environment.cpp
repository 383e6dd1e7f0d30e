// What a run records about where it ran: the device, driver, CUDA and LibTorch, the host,
// the runner's commit, and the commit and content hash of every plugin the points load.
#include "output/environment.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <set>

#include <torch/version.h>

#include "config/registry.hpp"
#include "runner/device.hpp"

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace runner {
namespace {

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

namespace {

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

}  // namespace

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

}  // namespace runner
