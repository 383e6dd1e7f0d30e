#include <gtest/gtest.h>

#include "runner/outcome.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "config/registry.hpp"
#include "runner/device.hpp"
#include "runner/profiler.hpp"
#include "runner/range.hpp"
#include "svg_check.hpp"
#include "config/validate.hpp"

namespace {

constexpr std::int64_t kBigBytes = 64 * 1024 * 1024;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh run directory per test; left in place (removing trees is unsafe in this binary).
std::filesystem::path fresh_run_dir(const std::string& name) {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  auto dir = std::filesystem::temp_directory_path() / ("memory_profiler_test_" + name + "_" + std::to_string(stamp));
  std::filesystem::create_directories(dir);
  return dir;
}

class MemoryProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override { registry.scan({RUNNER_TEST_PLUGIN_DIR}); }

  std::unique_ptr<runner::Profiler> make(runner::Context& ctx, const std::string& yaml = "") {
    ctx.plugins = &registry;
    const auto params = runner::resolve_plugin_options(registry, runner::PluginKind::Profiler, "memory", yaml);
    return ctx.create<runner::Profiler>(runner::PluginKind::Profiler, params);
  }
  static const runner::Metric& metric(const runner::Record& r, const std::string& name) {
    const runner::Metric* m = r.find(name);
    if (m == nullptr) throw std::runtime_error("no metric " + name);
    return *m;
  }

  runner::PluginRegistry registry;
};

TEST_F(MemoryProfilerTest, OnCpuSkipsThePointSayingItNeedsCuda) {
  runner::Context ctx;
  ctx.run_dir = fresh_run_dir("cpu");
  ctx.artifact_dir = ctx.run_dir / "artifacts" / "p-0";
  auto profiler = make(ctx);
  runner::Record summary;
  try {
    profiler->point_begin(ctx);
    FAIL() << "expected SkipPoint";
  } catch (const runner::SkipPoint& e) {
    EXPECT_EQ(std::string(e.what()).rfind("memory profiler: needs CUDA", 0), 0u) << e.what();
  }
  {
    runner::ScopedRange r("forward");
    at::ones({16});
  }
  profiler->point_end(ctx, summary);
  EXPECT_EQ(std::get<std::string>(metric(summary, "memory_profiler").value), "cpu: no allocator history");
  EXPECT_TRUE(summary.artifacts.empty());
  EXPECT_FALSE(std::filesystem::exists(ctx.artifact_dir));
}

TEST_F(MemoryProfilerTest, RejectsAnEmptyTraceBuffer) {
  runner::Context ctx;
  EXPECT_THROW(make(ctx, "{max_entries: 0}"), std::runtime_error);  // below the declared range
}

TEST_F(MemoryProfilerTest, CudaPointWritesSnapshotChartAndAttributesTheLargestAllocation) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  runner::Context ctx;
  ctx.device = c10::Device(c10::kCUDA, 0);
  ctx.run_dir = fresh_run_dir("cuda");
  ctx.point_name = "part-0";
  ctx.artifact_dir = ctx.run_dir / "artifacts" / ctx.point_name;
  // figure_dir is confined to relative paths (it is usually reports/<id>/figures): one under the test's cwd.
  const auto figures = std::filesystem::path("memory_profiler_test_figures") / ctx.run_dir.filename();
  auto profiler = make(ctx, "{figure_dir: " + figures.string() + ", figure_prefix: fig-}");
  runner::add_range_listener(profiler.get());
  runner::Record summary;
  profiler->point_begin(ctx);
  {
    runner::ScopedRange outer("outer");
    at::Tensor small = at::ones({1024}, at::TensorOptions().device(ctx.device));
    {
      runner::ScopedRange inner("big");
      at::Tensor big = at::ones({kBigBytes / 4}, at::TensorOptions().device(ctx.device));
    }
    at::Tensor after = at::ones({2048}, at::TensorOptions().device(ctx.device));
  }
  profiler->point_end(ctx, summary);
  runner::remove_range_listener(profiler.get());

  EXPECT_EQ(std::get<double>(metric(summary, "largest_allocation_bytes").value), kBigBytes);
  EXPECT_EQ(std::get<std::string>(metric(summary, "largest_allocation_where").value), "outer/big");
  EXPECT_GE(std::get<double>(metric(summary, "peak_allocated_bytes").value), kBigBytes);
  EXPECT_GE(std::get<double>(metric(summary, "timeline_peak_bytes").value), kBigBytes);
  EXPECT_EQ(std::get<std::string>(metric(summary, "peak_where").value), "outer/big");

  ASSERT_EQ(summary.artifacts.size(), 3u);
  EXPECT_EQ(summary.artifacts[0], "artifacts/part-0/memory_snapshot.pickle");
  const std::string pickle = read_file(ctx.run_dir / summary.artifacts[0]);
  ASSERT_GT(pickle.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(pickle[0]), 0x80) << "pickle protocol marker";

  const std::string svg = read_file(ctx.artifact_dir / "active_memory.svg");
  EXPECT_EQ(plugins::memory_profiler::testing::xml_problem(svg), "");
  EXPECT_EQ(plugins::memory_profiler::testing::count_of(svg, "<polyline"), 1u);
  EXPECT_EQ(read_file(figures / "fig-part-0.svg"), svg);

  const std::string csv = read_file(ctx.artifact_dir / "largest_allocations.csv");
  EXPECT_EQ(csv.rfind("rank,bytes,mib,count,where,first_time_ms\n1," + std::to_string(kBigBytes) + ",64,1,outer/big,", 0), 0u)
      << csv;

  // The snapshot is plain pickle: Python (without torch) loads it, as memory_viz's reader does.
  const std::string python = RUNNER_PYTHON;
  if (!python.empty()) {
    const std::string cmd = python + " -c \"import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); "
                                     "assert 'segments' in d and 'device_traces' in d; "
                                     "print('user_metadata in trace:', any(e.get('user_metadata')=='outer/big' "
                                     "for t in d['device_traces'] for e in t))\" " +
                            (ctx.run_dir / summary.artifacts[0]).string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST_F(MemoryProfilerTest, CudaRecordingStopsAtPointEnd) {
  if (!runner::cuda_available()) GTEST_SKIP() << "no CUDA device";
  runner::Context ctx;
  ctx.device = c10::Device(c10::kCUDA, 0);
  ctx.run_dir = fresh_run_dir("cuda_stop");
  ctx.artifact_dir = ctx.run_dir / "artifacts" / "p-0";
  runner::Record first, second;
  {
    auto profiler = make(ctx);
    profiler->point_begin(ctx);
    at::ones({1 << 20}, at::TensorOptions().device(ctx.device));
    profiler->point_end(ctx, first);
  }
  // A second point starts from a cleared history: its largest allocation is its own.
  auto profiler = make(ctx);
  profiler->point_begin(ctx);
  at::ones({1000}, at::TensorOptions().device(ctx.device));
  profiler->point_end(ctx, second);
  EXPECT_LT(std::get<double>(metric(second, "largest_allocation_bytes").value), 1 << 20);
}

}  // namespace
