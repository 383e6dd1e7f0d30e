// Helpers for the history tests: fresh directories and synthetic records in the
// results.jsonl format that the host writes.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/stored_record.hpp"

namespace runner::history::testing {

inline std::filesystem::path fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::path(HISTORY_TEST_DIR) /
             (name + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json env_json(const std::string& device_name = "Test CPU", const std::string& commit = "abc1234def56") {
  return {{"device", "cpu"}, {"cpu", device_name}, {"libtorch", "2.11.0"}, {"host", "testhost"},
          {"git_commit", commit}, {"runner_version", "0.1.0"}};
}

// One record of part "main", point `point`, size=`size`, with a step_ms metric
// holding `samples` and a peak_bytes single value.
inline nlohmann::json record(int point, int size, const std::vector<double>& samples, double peak_bytes = 1e6,
                             const std::string& status = "ok", const nlohmann::json& env = env_json()) {
  nlohmann::json j = {{"experiment", "demo"}, {"part", "main"}, {"point", point}, {"task", "echo"}, {"status", status},
                      {"params", {{"size", size}, {"device", "cpu"}, {"measure.measured_steps", samples.size()}}},
                      {"labels", nlohmann::json::object()}, {"env", env}, {"time", "2026-11-23T00:00:00Z"},
                      {"artifacts", nlohmann::json::array()}};
  if (status == "ok" && !samples.empty()) {
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double s : samples) mean += s;
    mean /= static_cast<double>(samples.size());
    double var = 0;
    for (double s : samples) var += (s - mean) * (s - mean);
    const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                            : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
    j["metrics"]["step_ms"] = {{"unit", "ms"},           {"n", samples.size()}, {"mean", mean},
                               {"std", std::sqrt(var / std::max<size_t>(1, samples.size() - 1))},
                               {"median", median},       {"min", sorted.front()}, {"max", sorted.back()},
                               {"samples", samples}};
    j["metrics"]["peak_bytes"] = {{"unit", "bytes"}, {"value", peak_bytes}};
    j["metrics"]["note"] = {{"unit", ""}, {"text", "hello"}};
  } else {
    j["error"] = "pretend failure";
    j["metrics"] = nlohmann::json::object();
  }
  return j;
}

// Lines as the store takes them.
inline std::vector<StoredRecord> stored(const std::vector<nlohmann::json>& lines) {
  std::vector<StoredRecord> out;
  for (const auto& j : lines) out.push_back(decode_record(j));
  return out;
}

// n samples around `center` with a small deterministic spread.
inline std::vector<double> around(double center, int n = 12, double spread = 0.01) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center * (1 + spread * ((i * 7 % n) - n / 2.0) / n));
  return v;
}

}  // namespace runner::history::testing
