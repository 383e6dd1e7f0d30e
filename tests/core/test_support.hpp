// Shared helpers for core tests: temporary files and a registry with the built
// plugins plus the test plugins.
#pragma once
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "registry.hpp"

namespace runner::testing {

// A fresh directory under the build tree (never removed: remove_all is unsafe
// next to this LibTorch, and the build tree is disposable).
inline std::filesystem::path fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::path(RUNNER_BINARY_DIR) / "test-tmp" /
             (name + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
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
