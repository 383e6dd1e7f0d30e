#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "runner/record_selection.hpp"
#include "model_formulas.hpp"
#include "task_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace plugins::accounting;
using Selection = runner::RecordSelection;
using runner::find_measured;
using runner::MeasuredRecord;
using runner::parse_where;
using runner::testing::metric_number;
using runner::testing::metric_text;

// b = 2, s = 4, d = 3, fp32: one s x s matrix is 2 x 16 x 4 = 128 B, one b x s x d tensor 96 B.
TEST(NaiveAttentionMemory, HandWorkedSmallCase) {
  const NaiveAttention a{2, 4, 3, 4};
  EXPECT_DOUBLE_EQ(a.matrix(), 128.0);
  EXPECT_DOUBLE_EQ(a.saved(), 3 * 96.0 + 128.0);            // q, k, v, P = 416
  EXPECT_DOUBLE_EQ(a.before_backward(), 5 * 96.0 + 128.0);  // + out, dO = 608
  EXPECT_DOUBLE_EQ(a.forward_peak(), 3 * 96.0 + 3 * 128.0);  // 672
  EXPECT_DOUBLE_EQ(a.backward_peak(), 608.0 + 256.0 + 288.0);  // + dP, dS, dq, dk, dv = 1152
}

TEST(NaiveAttentionMemory, SmallestOomCellOfTheH100Run) {
  // seq 32768, d 16, batch 8: three 8 x 32768^2 x 4 B = 32 GiB matrices + q, k, v (48 MiB).
  const NaiveAttention a{8, 32768, 16, 4};
  EXPECT_DOUBLE_EQ(a.matrix() / (1 << 30), 32.0);
  EXPECT_DOUBLE_EQ(a.forward_peak() / (1 << 30), 96.0 + 3 * 8 * 32768.0 * 16 * 4 / (1 << 30));
}

TEST(NaiveAttentionMemory, SavedMemoryGrowsTowardsFourTimesPerDoubling) {
  // s = 4 -> 8 (b 2, d 3): 416 B -> 3 x 192 + 512 = 1088 B.
  const NaiveAttention a{2, 4, 3, 4}, b{2, 8, 3, 4};
  EXPECT_DOUBLE_EQ(b.saved() / a.saved(), 1088.0 / 416.0);
  const NaiveAttention big{8, 16384, 128, 4}, bigger{8, 32768, 128, 4};
  EXPECT_NEAR(bigger.saved() / big.saved(), 4.0, 0.1);
}

// b 1, s 4, d 8, d_ff 16, 2 layers, 2 heads (d_head 4), vocab 10.
TEST(ForwardFlopsPerKernelClass, HandWorkedSmallCase) {
  const ForwardFlops f{1, 4, 8, 16, 2, 2, 10, 5};
  EXPECT_DOUBLE_EQ(f.linear(), 2 * 2 * 4 * (4 * 64 + 3 * 8 * 16.0));  // 10240
  EXPECT_DOUBLE_EQ(f.lm_head(), 2 * 4 * 8 * 10.0);                    // 640
  EXPECT_DOUBLE_EQ(f.attention_scores(), 2 * 2 * 16 * 8.0);           // 512
  EXPECT_DOUBLE_EQ(f.attention_values(), 512.0);
  EXPECT_DOUBLE_EQ(f.softmax(), 2 * 2 * 16 * 5.0);  // 320
  EXPECT_DOUBLE_EQ(f.total(), 12224.0);
  EXPECT_DOUBLE_EQ(f.softmax_per_attention_matmul(), 5.0 / (4 * 4));  // 5 / (4 d_head)
}

TEST(BucketOverheadModel, OptimumBalancesCallsAgainstTheLastBucket) {
  // s = 100 B, w = 4 B/s, o = 1 s: overhead(5) = 5 x 1 + 100 / (5 x 4) = 10 s.
  const BucketModel m{100, 4, 1};
  EXPECT_DOUBLE_EQ(m.overhead(5), 10.0);
  EXPECT_DOUBLE_EQ(m.best_buckets(), 5.0);        // sqrt(100 / 4)
  EXPECT_DOUBLE_EQ(m.best_bucket_bytes(), 20.0);  // sqrt(100 x 4 x 1) = s / 5
  EXPECT_DOUBLE_EQ(m.best_overhead(), 10.0);      // 2 sqrt(100 x 1 / 4)
  EXPECT_GT(m.overhead(4), m.best_overhead());
  EXPECT_GT(m.overhead(6), m.best_overhead());
  EXPECT_DOUBLE_EQ(m.buckets(30), 4.0);  // ceil(100 / 30)
  EXPECT_DOUBLE_EQ(m.last_bucket(5), 1 + 100 / 20.0);  // o + (s / n_b) / w
}

TEST(BucketOverheadModel, LineFitRecoversInterceptAndSlope) {
  const std::vector<std::pair<double, double>> points{{0, 1}, {10, 3}, {20, 5}};
  const LineFit f = fit_line(points);
  EXPECT_NEAR(f.intercept, 1.0, 1e-12);
  EXPECT_NEAR(f.slope, 0.2, 1e-12);
}

TEST(OptimizerSharding, FourRanksOfAHundredParameters) {
  // ring factor (4 - 1) / 4 = 0.75; fp32 gradients are 400 B.
  const ShardingMemory none = sharding_memory(Scheme::Unsharded, 100, 4);
  EXPECT_DOUBLE_EQ(none.total(), 1600.0);    // 16 B per parameter
  EXPECT_DOUBLE_EQ(none.traffic, 600.0);     // all-reduce 2 x 0.75 x 400
  const ShardingMemory ours = sharding_memory(Scheme::Sharded, 100, 4);
  EXPECT_DOUBLE_EQ(ours.optimizer_state, 200.0);  // 800 / 4
  EXPECT_DOUBLE_EQ(ours.traffic, 900.0);          // + broadcast 0.75 x 400
  const ShardingMemory zero1 = sharding_memory(Scheme::Zero1, 100, 4);
  EXPECT_DOUBLE_EQ(zero1.total(), ours.total());  // same memory ...
  EXPECT_DOUBLE_EQ(zero1.traffic, 600.0);         // ... DDP's traffic: reduce-scatter + all-gather
  const ShardingMemory mixed = sharding_memory(Scheme::Zero1Mixed, 100, 4);
  EXPECT_DOUBLE_EQ(mixed.total(), 200 + 200 + 300.0);  // 2 + 2 + 12 / 4 B per parameter
  EXPECT_DOUBLE_EQ(mixed.traffic, 300.0);
}

// A results.jsonl with two ranks and their aggregate, and one OOM point.
class MeasuredFile : public runner::testing::TaskTest {
 protected:
  void SetUp() override {
    TaskTest::SetUp();
    dir = fs::temp_directory_path() / ("accounting_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    file = dir / "results.jsonl";
    std::ofstream out(file);
    for (const char* rank : {"\"rank\":\"0\"", "\"rank\":\"1\"", ""})
      out << R"({"part":"main","status":"ok","labels":{)" << rank
          << R"(},"params":{"seq":16,"d_head":4.0},"metrics":{"memory_gib":{"unit":"GiB","value":2.0},)"
          << R"("time_ms":{"unit":"ms","median":3.0,"mean":4.0,"n":3}}})" << "\n";
    out << R"({"part":"main","status":"oom","labels":{},"params":{"seq":32,"d_head":4},"metrics":{}})" << "\n";
  }
  // std::remove, not fs::remove_all: that symbol resolves into libtorch's copy and crashes.
  void TearDown() override {
    std::remove(file.c_str());
    std::remove(dir.c_str());
  }
  Selection select(std::vector<std::string> where) const {
    Selection s;
    s.file = file;
    s.part = "main";
    s.where = parse_where(where, {{"seq", "16"}}, "measured_where");
    return s;
  }
  fs::path dir, file;
};

TEST_F(MeasuredFile, SubstitutesOptionsAndPicksTheAggregate) {
  const MeasuredRecord r = find_measured(select({"seq={seq}", "d_head=4", "rank="}), "median");
  EXPECT_EQ(r.status, runner::RecordStatus::ok);
  EXPECT_DOUBLE_EQ(r.numbers.at("memory_gib"), 2.0);
  EXPECT_DOUBLE_EQ(r.numbers.at("time_ms"), 3.0);  // the median of the stats
  EXPECT_DOUBLE_EQ(find_measured(select({"seq=16", "rank=1"}), "mean").numbers.at("time_ms"), 4.0);
}

TEST_F(MeasuredFile, AmbiguousSelectionSaysHowToNarrowIt) {
  try {
    find_measured(select({"seq=16"}), "median");
    FAIL() << "three records matched";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3 records match"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank="), std::string::npos) << e.what();
  }
}

TEST_F(MeasuredFile, NoMatchNamesTheFileTheKeyAndItsValues) {
  try {
    find_measured(select({"seq=64", "rank="}), "median");
    FAIL() << "nothing should match";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(file.string()), std::string::npos) << m;
    EXPECT_NE(m.find("seq has 16, 32"), std::string::npos) << m;
  }
}

TEST_F(MeasuredFile, MissingFileAndBadEntriesAreOneLineErrors) {
  Selection s = select({"seq=16"});
  s.file = dir / "nope.jsonl";
  EXPECT_THROW(find_measured(s, "median"), std::invalid_argument);
  EXPECT_THROW(parse_where({"seq"}, {}, "measured_where"), std::invalid_argument);
  EXPECT_THROW(parse_where({"seq={nope}"}, {{"seq", "1"}}, "measured_where"), std::invalid_argument);
}

TEST_F(MeasuredFile, TaskPutsMeasuredBesideAnalyticWithTheDifference) {
  // b 2, s 16, d 4: before backward = 5 x 2 x 16 x 4 x 4 B + 2 x 256 x 4 B = 2560 + 2048 B.
  const auto r = run_task_once("accounting", "{quantity: attention_memory, batch_size: 2, seq: 16, d_head: 4, "
                                             "measured_file: '" + file.string() + "', measured_part: main, "
                                             "measured_where: ['seq={seq}', 'rank='], "
                                             "compare: [before_backward_gib=memory_gib]}");
  const double analytic = 4608.0 / (1 << 30);
  EXPECT_DOUBLE_EQ(metric_number(r, "before_backward_gib"), analytic);
  EXPECT_DOUBLE_EQ(metric_number(r, "measured_before_backward_gib"), 2.0);
  EXPECT_DOUBLE_EQ(metric_number(r, "diff_before_backward_gib"), 2.0 - analytic);
  EXPECT_EQ(metric_text(r, "measured_status"), "ok");
}

TEST_F(MeasuredFile, AnOomMeasurementShowsAsOom) {
  const auto r = run_task_once("accounting", "{quantity: attention_memory, seq: 32, d_head: 4, measured_file: '" +
                                                 file.string() + "', measured_where: ['seq={seq}'], "
                                                 "compare: [forward_peak_gib=memory_gib]}");
  EXPECT_EQ(metric_text(r, "measured_forward_peak_gib"), "OOM");
}

TEST_F(MeasuredFile, CompareNamingAMetricTheQuantityLacksIsRefused) {
  EXPECT_THROW(run_task_once("accounting", "{quantity: attention_memory, measured_file: '" + file.string() +
                                               "', compare: [nope=memory_gib]}"),
               std::invalid_argument);
}

TEST_F(MeasuredFile, PreflightRefusesASelectionThatMatchesNothingBeforeAnythingRuns) {
  const runner::PluginManifest* m = registry.find(runner::PluginKind::Task, "accounting");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->preflight);
  const runner::Params p = runner::resolve_plugin_options(
      registry, runner::PluginKind::Task, "accounting",
      "{quantity: attention_memory, seq: 64, measured_file: '" + file.string() +
          "', measured_where: ['seq={seq}'], compare: [saved_gib=memory_gib]}");
  try {
    m->preflight(p);
    FAIL() << "seq 64 has no record";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("measured_file '" + file.string() + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("measured_where"), std::string::npos) << msg;
    EXPECT_NE(msg.find("seq has 16, 32"), std::string::npos) << msg;
  }
  // The same selection at a measured seq passes.
  const runner::Params ok = runner::resolve_plugin_options(
      registry, runner::PluginKind::Task, "accounting",
      "{quantity: attention_memory, seq: 16, measured_file: '" + file.string() +
          "', measured_where: ['seq={seq}', 'rank='], compare: [saved_gib=memory_gib]}");
  EXPECT_NO_THROW(m->preflight(ok));
}

TEST_F(MeasuredFile, KernelFlopsReadTheModelsFacts) {
  // xl at context 256, batch 4: d_head 64, so softmax / attention matmuls = 5 / 256.
  const auto r = run_task_once("accounting", "{quantity: kernel_flops, batch_size: 4, "
                                             "model: {name: transformer_lm, size: xl, context_length: 256}}");
  EXPECT_DOUBLE_EQ(metric_number(r, "softmax_per_attention_matmul_pct"), 100 * 5.0 / 256);
  // 48 x 2 x 4 x 256 x (4 x 1600^2 + 3 x 1600 x 6400) / 1e9
  EXPECT_NEAR(metric_number(r, "linear_gflop"), 48.0 * 2 * 4 * 256 * (4 * 1600.0 * 1600 + 3 * 1600.0 * 6400) / 1e9, 1e-6);
}

TEST_F(MeasuredFile, QuantitiesOfAModelNeedOne) {
  EXPECT_THROW(run_task_once("accounting", "{quantity: kernel_flops}"), std::invalid_argument);
}

TEST_F(MeasuredFile, ShardedOptimizerHalvesAdamStateOnTwoRanks) {
  const auto r = run_task_once("accounting", "{quantity: optimizer_memory, scheme: sharded, world_size: 2, "
                                             "model: {name: transformer_lm, size: xl}}");
  // 1,998,235,200 parameters x 8 B / 2
  EXPECT_NEAR(metric_number(r, "optimizer_state_gib"), 1998235200.0 * 4 / (1 << 30), 1e-9);
}

}  // namespace
