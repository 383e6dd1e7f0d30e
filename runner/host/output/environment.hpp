// What a run records about where it ran (every record's `env`): the device, GPU or CPU,
// driver, CUDA runtime, LibTorch, host, the runner's git commit and version, and which
// plugin files the points load, with their commits and content hashes.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "config/sweep.hpp"

namespace runner {

class PluginRegistry;

// Environment of this process: device, GPU, driver, CUDA, LibTorch, host, git commit.
nlohmann::json capture_environment(const c10::Device& device);

// The files of the task and profiler plugins the points use, by kind/name.
std::map<std::string, std::filesystem::path> plugin_files(const std::vector<Point>& points,
                                                          const PluginRegistry& registry);

// {"task/echo": "<commit>", ...}: the commit of the git repository each plugin file
// lies in (a plugin built in the runner's tree has the runner's; one built in its own
// repository, that one's); plugins outside any repository are left out.
nlohmann::json plugin_commits(const std::map<std::string, std::filesystem::path>& plugin_files);
// {"task/echo": {"sha256": "<content hash>", "file": "...", "commit": "..."}}: what
// each plugin .so the run loaded is, in-tree or not, so a rebuilt plugin (same
// commit or none) still shows as changed code in the history and in compares.
nlohmann::json plugin_identities(const std::map<std::string, std::filesystem::path>& plugin_files);

// Now, UTC: "2026-01-31T12:00:00Z" (records, logs), or "20260131T120000Z" (run directory names).
std::string utc_timestamp(bool for_path);

}  // namespace runner
