// The kernels profiler around a real train step on the CPU (a tiny Transformer LM
// with naive attention): phase tables, attention FLOPs, cost, and the Chrome trace.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/registry.hpp"
#include "runner/profiler.hpp"
#include "runner/range.hpp"
#include "runner/task.hpp"
#include "config/validate.hpp"

namespace {

struct QuietLog : runner::Logger {
  void info(const std::string&) override {}
  void warn(const std::string&) override {}
};

std::filesystem::path fresh_run_dir(const std::string& name) {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  auto dir = std::filesystem::temp_directory_path() / ("kernels_profiler_test_" + name + "_" + std::to_string(stamp));
  std::filesystem::create_directories(dir);
  return dir;
}

const std::string kTinyStep =
    "{model: {name: transformer_lm, size: custom, d_model: 32, d_ff: 64, num_layers: 2, num_heads: 2, "
    "vocab_size: 256, context_length: 16}, optimizer: adamw, batch_size: 2, mode: train_step}";

class KernelProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry.scan({RUNNER_TEST_PLUGIN_DIR});
    ctx.plugins = &registry;
    ctx.log = &log;
    ctx.run_dir = fresh_run_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ctx.point_name = "part-0";
    ctx.artifact_dir = ctx.run_dir / "artifacts" / ctx.point_name;
    ctx.measure.warmup_steps = 3;
    ctx.measure.measured_steps = 2;
  }

  std::unique_ptr<runner::Profiler> make(const std::string& yaml) {
    const auto params = runner::resolve_plugin_options(registry, runner::PluginKind::Profiler, "kernels", yaml);
    return ctx.create<runner::Profiler>(runner::PluginKind::Profiler, params);
  }

  // As the host runs a point: listener, begin, task, end, the profiler's own records.
  std::vector<runner::Record> profile_point(runner::Profiler& profiler, const std::string& task_yaml) {
    runner::add_range_listener(&profiler);
    profiler.point_begin(ctx);
    runner::RecordList task_out;
    {
      const auto params = runner::resolve_plugin_options(registry, runner::PluginKind::Task, "train_step", task_yaml);
      auto task = ctx.create<runner::Task>(runner::PluginKind::Task, params);
      task->run(ctx, params, task_out);
    }
    runner::remove_range_listener(&profiler);
    profiler.point_end(ctx, summary);
    runner::RecordList own;
    profiler.emit_records(ctx, task_out.records, own);
    return own.records;
  }

  static std::vector<const runner::Record*> with(const std::vector<runner::Record>& records, const std::string& table,
                                                 const std::string& phase = "") {
    std::vector<const runner::Record*> out;
    for (const auto& r : records)
      if (r.labels.at("table") == table && (phase.empty() || r.labels.at("phase") == phase)) out.push_back(&r);
    return out;
  }
  static double number(const runner::Record& r, const std::string& name) {
    const runner::Metric* m = r.find(name);
    if (m == nullptr) throw std::runtime_error("no metric " + name);
    return std::get<double>(m->value);
  }
  static std::string text(const runner::Record& r, const std::string& name) {
    const runner::Metric* m = r.find(name);
    if (m == nullptr) throw std::runtime_error("no metric " + name);
    return std::get<std::string>(m->value);
  }

  runner::PluginRegistry registry;
  QuietLog log;
  runner::Context ctx;
  runner::Record summary;
};

TEST_F(KernelProfilerTest, CpuTrainStepGivesPhaseTablesAttentionFlopsAndCost) {
  auto profiler = make("{top_k: 1000}");
  const auto records = profile_point(*profiler, kTinyStep);

  for (const std::string phase : {"step", "forward", "backward", "optimizer", "forward/attention/scores",
                                  "forward/attention/softmax", "forward/attention/weighted_sum"}) {
    const auto phases = with(records, "phases", phase);
    ASSERT_EQ(phases.size(), 1u) << phase;
    EXPECT_GT(number(*phases[0], "kernel_ms"), 0) << phase;
    double share = 0, class_share = 0;
    for (const auto* r : with(records, "kernels", phase)) share += number(*r, "share");
    for (const std::string c : {"matmul", "attention", "elementwise", "reduction", "memcpy", "other"})
      class_share += number(*phases[0], "share_" + c);
    EXPECT_NEAR(share, 100.0, 1e-6) << phase;
    EXPECT_NEAR(class_share, 100.0, 1e-6) << phase;
  }
  // Calls are per profiled step: aten::_softmax once per layer.
  const auto softmax_rows = with(records, "kernels", "forward/attention/softmax");
  const auto softmax = std::find_if(softmax_rows.begin(), softmax_rows.end(),
                                    [](const runner::Record* r) { return r->labels.at("kernel") == "aten::_softmax"; });
  ASSERT_NE(softmax, softmax_rows.end());
  EXPECT_EQ((*softmax)->labels.at("class"), "reduction");
  EXPECT_DOUBLE_EQ(number(**softmax, "calls"), 2.0);
  const auto forward = with(records, "phases", "forward")[0];
  EXPECT_GT(number(*forward, "share_matmul"), 0);
  EXPECT_FALSE(text(*forward, "top_kernel").empty());
  EXPECT_GT(number(*forward, "kernel_vs_timer"), 0);
  EXPECT_LE(number(*forward, "kernel_vs_timer"), 101.0);  // op self times never outlast the phase

  // (e): 2 matmuls of 2*T*T*d_head FLOPs each per head against 5 FLOPs per score: 5 / (4 * 16).
  const auto attention = with(records, "attention", "forward");
  ASSERT_EQ(attention.size(), 1u);
  EXPECT_NEAR(number(*attention[0], "softmax_vs_matmul_flop"), 5.0 / 64.0, 1e-12);
  EXPECT_GT(number(*attention[0], "softmax_vs_matmul_time"), 0);

  const auto cost = with(records, "cost");
  ASSERT_EQ(cost.size(), 1u);
  EXPECT_DOUBLE_EQ(number(*cost[0], "profiled_steps"), 2.0);
  EXPECT_GT(number(*cost[0], "unprofiled_wall_ms"), 0);
  EXPECT_GT(number(*cost[0], "profiled_wall_ms"), 0);
  EXPECT_GT(number(*cost[0], "profiled_step_ms"), 0);
  (void)number(*cost[0], "profiler_overhead");
}

TEST_F(KernelProfilerTest, TraceIsChromeJsonWithTheRunnerRanges) {
  auto profiler = make("{tables: false}");
  EXPECT_TRUE(profile_point(*profiler, kTinyStep).empty());
  ASSERT_EQ(summary.artifacts.size(), 1u);
  EXPECT_EQ(summary.artifacts[0], "artifacts/part-0/trace.json");
  std::ifstream in(ctx.run_dir / summary.artifacts[0]);
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<std::string> annotations;
  std::size_t cpu_ops = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "user_annotation") annotations.insert(e.value("name", ""));
    if (e.value("cat", "") == "cpu_op") ++cpu_ops;
    if (e.value("ph", "") == "X") {
      EXPECT_TRUE(e.contains("ts") && e.contains("dur")) << e.dump();
    }
  }
  for (const std::string name : {"measure", "step_0", "step_1", "forward", "backward", "optimizer", "layer0",
                                  "attention", "attention/scores", "attention/softmax", "attention/weighted_sum"})
    EXPECT_TRUE(annotations.count(name)) << "missing range " << name;
  EXPECT_FALSE(annotations.count("warmup")) << "warm-up runs unprofiled";
  EXPECT_FALSE(annotations.count("step_2")) << "only the two measured steps";
  EXPECT_GT(cpu_ops, 0u);
}

TEST_F(KernelProfilerTest, NothingWrittenWhenTraceAndTablesAreOff) {
  auto profiler = make("{tables: false, trace: false}");
  EXPECT_TRUE(profile_point(*profiler, kTinyStep).empty());
  EXPECT_TRUE(summary.artifacts.empty());
}

TEST_F(KernelProfilerTest, AnUnreadableRulesFileIsNamed) {
  try {
    make("{rules: /nonexistent/classes.yaml}");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/classes.yaml"), std::string::npos) << e.what();
  }
}

}  // namespace

// An OOM in warm-up ends a point before its measured steps: Kineto was prepared but
// never started. The next point must still profile (it used to fail with "Can't
// disable Kineto profiler when it's not running").
TEST_F(KernelProfilerTest, APointThatFailsBeforeItsMeasuredStepsLeavesTheNextPointWorking) {
  {
    auto failing = make("{}");
    runner::add_range_listener(failing.get());
    failing->point_begin(ctx);
    runner::remove_range_listener(failing.get());
    runner::Record ignored;
    failing->point_end(ctx, ignored);  // as the host does after a task error
  }
  auto profiler = make("{}");
  const auto records = profile_point(*profiler, kTinyStep);
  EXPECT_FALSE(with(records, "phases", "step").empty());
}
