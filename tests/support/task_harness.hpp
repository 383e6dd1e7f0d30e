// For task plugins' tests: run a task once, as the host would for one point
// (options resolved with defaults, plugin created through the registry), and
// read metrics back. Plugin test targets have tests/support on their include path.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/registry.hpp"
#include "config/report_spec_check.hpp"
#include "runner/task.hpp"
#include "config/validate.hpp"

namespace runner::testing {

// A registry holding the plugins of this build.
class TaskTest : public ::testing::Test {
 protected:
  void SetUp() override { registry.scan({RUNNER_TEST_PLUGIN_DIR}); }

  // `ctx` supplies device, precision, seed and measure settings; its plugin factory is set here.
  std::vector<Record> run_task(const std::string& task, const std::string& options_yaml, Context ctx = {}) {
    ctx.plugins = &registry;
    const Params params = resolve_plugin_options(registry, PluginKind::Task, task, options_yaml);
    auto instance = ctx.create<Task>(PluginKind::Task, params);
    RecordList out;
    instance->run(ctx, params, out);
    expect_declared(task, params, out.records);
    return out.records;
  }

  // What the task emitted is what its manifest declares (when it declares it): report
  // specs are checked against the declarations before a run, and a point that lacks a
  // metric declared for every point with its options is invalid.
  void expect_declared(const std::string& task, const Params& params, const std::vector<Record>& records) {
    for (const std::string& name : required_metrics(task, params, registry))
      EXPECT_TRUE(std::any_of(records.begin(), records.end(), [&](const Record& r) { return r.find(name) != nullptr; }))
          << task << " declares metric '" << name << "' for every point with these options, and none of its "
          << records.size() << " record(s) has it";
    const auto metrics = declared_metrics(task, params, registry);
    const PluginManifest* manifest = registry.find(PluginKind::Task, task);
    for (const Record& r : records) {
      for (const auto& [name, metric] : r.metrics)
        EXPECT_TRUE(!metrics || metrics->count(name)) << task << " records metric '" << name
                                                      << "', which its manifest does not declare";
      if (manifest == nullptr || !manifest->labels) continue;
      for (const auto& [key, value] : r.labels)
        EXPECT_NE(std::find(manifest->labels->begin(), manifest->labels->end(), key), manifest->labels->end())
            << task << " records label '" << key << "', which its manifest does not declare";
    }
  }

  // The one record a single-record task emits.
  Record run_task_once(const std::string& task, const std::string& options_yaml, Context ctx = {}) {
    auto records = run_task(task, options_yaml, std::move(ctx));
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? Record{} : records.front();
  }

  PluginRegistry registry;
};

template <class T>
const T& metric_value(const Record& record, const std::string& name) {
  static const T missing{};
  const Metric* m = record.find(name);
  EXPECT_NE(m, nullptr) << "no metric " << name;
  if (m == nullptr || !std::holds_alternative<T>(m->value)) {
    ADD_FAILURE() << "metric " << name << " has another type";
    return missing;
  }
  return std::get<T>(m->value);
}

inline double metric_number(const Record& r, const std::string& name) { return metric_value<double>(r, name); }
inline const std::string& metric_text(const Record& r, const std::string& name) {
  return metric_value<std::string>(r, name);
}
inline const Stats& metric_stats(const Record& r, const std::string& name) { return metric_value<Stats>(r, name); }

}  // namespace runner::testing
