// Shared helpers for core tests: temporary files and a registry with the built
// plugins plus the test plugins.
#pragma once
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "config/registry.hpp"

namespace runner::testing {

// A fresh directory under the build tree (never removed: remove_all is unsafe
// next to this LibTorch, and the build tree is disposable). Each test runs in its own
// process, so the pid and counter repeat once pids are reused, and test-tmp outlives a test
// run: a name already taken by an earlier process is skipped (mkdir fails on it), never
// reused with that process's files in it.
inline std::filesystem::path fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  const auto root = std::filesystem::path(RUNNER_BINARY_DIR) / "test-tmp";
  std::filesystem::create_directories(root);
  for (;;) {
    auto dir = root / (name + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    if (std::filesystem::create_directory(dir)) return dir;
  }
}

inline std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The runner binary with the test plugins on RUNNER_PLUGIN_PATH; stdout and stderr together.
struct RunnerResult {
  int exit_code;
  std::string output;
};
inline RunnerResult run_runner(const std::string& args, const std::string& env = "") {
  const auto log = fresh_dir("runner-log") / "out.txt";
  const std::string cmd = "RUNNER_PLUGIN_PATH=" + std::string(RUNNER_TEST_PLUGIN_DIR) + "/extra " + env + " " +
                          std::string(RUNNER_EXE) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(log)};
}

inline const PluginRegistry& test_registry() {
  static PluginRegistry* registry = [] {
    auto* r = new PluginRegistry();
    r->scan({std::filesystem::path(RUNNER_BINARY_DIR) / "plugins",
             std::filesystem::path(RUNNER_TEST_PLUGIN_DIR) / "extra"});
    return r;
  }();
  return *registry;
}

}  // namespace runner::testing
