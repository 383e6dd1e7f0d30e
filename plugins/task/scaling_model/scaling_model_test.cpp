#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ddp_scaling.hpp"
#include "task_harness.hpp"

namespace {

using namespace plugins::scaling_model;
using runner::testing::metric_number;
using runner::testing::metric_text;

TEST(AlphaBetaFit, RecoversAnExactLine) {
  // t = 20 us + x / 300 GB/s at 1 MB .. 1 GB.
  std::vector<std::pair<double, double>> xy;
  for (double x : {1e6, 1e7, 1e8, 1e9}) xy.emplace_back(x, 20e-6 + x / 300e9);
  const AlphaBeta f = fit_relative(xy);
  EXPECT_NEAR(f.alpha, 20e-6, 1e-12);
  EXPECT_NEAR(1 / f.beta, 300e9, 1e-3 * 300e9);
}

TEST(AlphaBetaFit, SmallSizesDecideAlphaEvenWhenLargeOnesAreNoisy) {
  // 1 GB 5% slow: an unweighted line would move alpha by ~ 0.05 x 3.3 ms; relative
  // weights keep it near the 1 MB point's latency.
  std::vector<std::pair<double, double>> xy;
  for (double x : {1e6, 1e7, 1e8}) xy.emplace_back(x, 20e-6 + x / 300e9);
  xy.emplace_back(1e9, 1.05 * (20e-6 + 1e9 / 300e9));
  const AlphaBeta f = fit_relative(xy);
  EXPECT_GT(f.alpha, 10e-6);
  EXPECT_LT(f.alpha, 30e-6);
}

TEST(AlphaBetaFit, FewerThanTwoPointsGiveNothing) {
  EXPECT_EQ(fit_relative({{1e6, 1e-3}}).beta, 0.0);
}

AllReduceModel two_rank_model() {
  AllReduceModel m;
  // A 2-rank fit with beta = 1 / 300 GB/s: busbw = 2 (2-1)/2 / beta = 300 GB/s.
  m.measured[2] = link_from_fit({20e-6, 1 / 300e9}, 2);
  m.gpus_per_node = 8;
  m.network = {5e-6, 50e9};
  return m;
}

TEST(AllReduceModel, WithinANodeTheRingFactorScalesTheMeasuredBusBandwidth) {
  const AllReduceModel m = two_rank_model();
  EXPECT_NEAR(m.link(2).busbw, 300e9, 1);
  EXPECT_DOUBLE_EQ(m.time(0, 8), 0.0);
  EXPECT_DOUBLE_EQ(m.time(1e9, 1), 0.0);
  // 8 ranks borrow the 2-rank link: 20 us + 2 x 7/8 x 1 GB / 300 GB/s.
  EXPECT_NEAR(m.time(1e9, 8), 20e-6 + 1.75 * 1e9 / 300e9, 1e-12);
  EXPECT_EQ(m.source_count(8), 2);
  EXPECT_EQ(m.nodes(8), 1);
}

TEST(AllReduceModel, AMeasuredCountIsUsedAndTheNearestLowerOneIsBorrowed) {
  AllReduceModel m = two_rank_model();
  m.measured[4] = {40e-6, 200e9};
  EXPECT_EQ(m.source_count(4), 4);
  EXPECT_EQ(m.source_count(6), 4);
  EXPECT_EQ(m.source_count(3), 2);
  EXPECT_NEAR(m.time(1e9, 4), 40e-6 + 1.5 * 1e9 / 200e9, 1e-12);
}

TEST(AllReduceModel, AcrossNodesTheNetworkBoundsBandwidthAndAddsTreeLatency) {
  const AllReduceModel m = two_rank_model();
  // 64 ranks = 8 nodes: 3 tree levels, up and down: 20 us + 6 x 5 us; busbw min(300, 50).
  EXPECT_EQ(m.nodes(64), 8);
  EXPECT_NEAR(m.link(64).alpha, 50e-6, 1e-15);
  EXPECT_NEAR(m.link(64).busbw, 50e9, 1);
  EXPECT_NEAR(m.time(1e9, 64), 50e-6 + 2 * 63.0 / 64 * 1e9 / 50e9, 1e-12);
  // 9 ranks already need 2 nodes (1 level).
  EXPECT_NEAR(m.link(9).alpha, 30e-6, 1e-15);
}

TransformerShape xl() {  // transformer_lm's xl at context 256, 4 sequences
  return {1600, 6400, 48, 10000, 4, 256};
}

TEST(TransformerGradients, CountsEveryParameterOnceInBackwardOrder) {
  const auto g = transformer_gradients(xl(), 4);
  ASSERT_EQ(g.size(), 48u * 9 + 3);
  double bytes = 0;
  for (const auto& x : g) bytes += x.bytes;
  EXPECT_DOUBLE_EQ(bytes, 4 * 1998235200.0);  // transformer_lm's declared xl parameter count
  EXPECT_DOUBLE_EQ(xl().parameters(), 1998235200.0);
  EXPECT_DOUBLE_EQ(g.front().bytes, 4 * 10000 * 1600.0);  // lm_head first
  EXPECT_DOUBLE_EQ(g.back().flops, g[g.size() - 2].flops);  // the embedding costs nothing
  for (size_t i = 1; i < g.size(); ++i) EXPECT_GE(g[i].flops, g[i - 1].flops);
}

TEST(BucketPacking, MatchesTheBucketCountsDdpBucketedRecorded) {
  // reports/ddp_benchmarking/data: `buckets` of the XL runs at 1, 10, 100 and 1000 MiB.
  const auto g = transformer_gradients(xl(), 4);
  const double mib = 1024.0 * 1024.0;
  EXPECT_EQ(pack_buckets(g, 1 * mib).size(), 435u);
  EXPECT_EQ(pack_buckets(g, 10 * mib).size(), 339u);
  EXPECT_EQ(pack_buckets(g, 100 * mib).size(), 98u);
  EXPECT_EQ(pack_buckets(g, 1000 * mib).size(), 8u);
  const auto b = pack_buckets(g, 100 * mib);
  EXPECT_DOUBLE_EQ(b.back().ready, 1.0);
  EXPECT_LT(b.front().ready, 0.05);
}

TEST(Schedule, HandWorkedTwoBuckets) {
  // Ready at 0.5 s and 1 s of a 1 s backward, 0.3 s per all-reduce: the first runs
  // 0.5-0.8 beside backward, the second 1.0-1.3 after it.
  AllReduceModel m;
  m.measured[2] = {0.3, 1e30};
  const std::vector<Bucket> buckets{{1, 0.5}, {1, 1.0}};
  const Prediction p = schedule(buckets, m, 2, 1.0);
  EXPECT_NEAR(p.allreduce, 0.6, 1e-12);
  EXPECT_NEAR(p.beside, 0.3, 1e-12);
  EXPECT_NEAR(p.beside_bytes, 1.0, 1e-12);  // 2 ranks: ring traffic = the bucket's bytes
  EXPECT_NEAR(p.exposed, 0.3, 1e-12);
  // Back to back: the second waits for the first (ready 0.1, 0.2; 0.5 s each).
  m.measured[2] = {0.5, 1e30};
  const Prediction q = schedule({{1, 0.1}, {1, 0.2}}, m, 2, 1.0);
  EXPECT_NEAR(q.beside, 0.9, 1e-12);
  EXPECT_NEAR(q.beside_bytes, 1.0 + 0.8, 1e-12);  // the second is 0.4 of 0.5 s beside
  EXPECT_NEAR(q.exposed, 0.1, 1e-12);
}

TEST(Predict, OneGpuIsTheMeasuredStep) {
  const StepTimes one{0.4, 0.12, 0.22, 0.05};
  const Prediction p = predict(one, {{1, 1.0}}, two_rank_model(), 1, 0.5);
  EXPECT_DOUBLE_EQ(p.step, 0.4);
  EXPECT_DOUBLE_EQ(p.efficiency, 1.0);
}

TEST(Predict, InterferenceIsAFixedPointAndCalibrationInvertsIt) {
  const StepTimes one{0.4, 0.12, 0.22, 0.05};
  const auto g = transformer_gradients(xl(), 4);
  const auto buckets = pack_buckets(g, 100 * 1024.0 * 1024.0);
  const AllReduceModel m = two_rank_model();
  const Prediction plain = predict(one, buckets, m, 2, 0);
  EXPECT_DOUBLE_EQ(plain.backward, 0.22);
  EXPECT_NEAR(plain.step, 0.4 + plain.exposed, 1e-12);
  const double kappa = 2.5e-12;  // 2.5 ms per GB beside backward
  const Prediction slowed = predict(one, buckets, m, 2, kappa);
  EXPECT_NEAR(slowed.backward, 0.22 + kappa * slowed.beside_bytes, 1e-9);
  EXPECT_GT(slowed.step, plain.step);
  EXPECT_NEAR(calibrate_interference(buckets, m, 2, 0.22, slowed.backward), kappa, 1e-6 * kappa);
}

TEST(Predict, EfficiencyFallsWhenTheNetworkIsSlowerThanBackward) {
  const StepTimes one{0.4, 0.12, 0.22, 0.05};
  const auto buckets = pack_buckets(transformer_gradients(xl(), 4), 100 * 1024.0 * 1024.0);
  const AllReduceModel m = two_rank_model();
  // 8 GB over 50 GB/s takes ~0.3 s > 0.22 s of backward: exposed communication.
  const Prediction across = predict(one, buckets, m, 64, 0);
  const Prediction within = predict(one, buckets, m, 8, 0);
  EXPECT_GT(across.exposed, 0.05);
  EXPECT_LT(across.efficiency, within.efficiency);
  EXPECT_LE(within.efficiency, 1.0);
}

// The task on the committed records: XL one-GPU step and NCCL 2-rank all-reduces (2xH200).
class ScalingTask : public runner::testing::TaskTest {
 protected:
  // A run folder under reports/: <experiment>/data or <experiment>/runs/<name>.
  static std::string data(const std::string& run) {
    return std::string(RUNNER_SOURCE_DIR) + "/reports/" + run + "/results.jsonl";
  }
  std::string options(const std::string& extra) const {
    return "{model: {name: transformer_lm, size: xl, context_length: 256}, bucket_mb: 100, step_file: '" +
           data("ddp_benchmarking/data") + "', step_part: single_gpu, step_where: ['rank='], fit_file: '" +
           data("distributed_communication_single_node/data") + "', fit_part: nccl, fit_where: ['rank='], " + extra + "}";
  }
};

TEST_F(ScalingTask, PredictsBesideTheMeasuredTwoGpuStep) {
  const auto r = run_task_once("scaling_model",
                               options("gpus: 2, interference: calibrated, calibration_file: '" +
                                       data("ddp_benchmarking/data") +
                                       "', calibration_part: bucketed, calibration_where: ['ddp.bucket_size_mb=100', "
                                       "'rank='], calibration_baseline_part: single_gpu, calibration_baseline_where: "
                                       "['rank='], measured_file: '" + data("ddp_benchmarking/runs/held_out") +
                                       "', measured_part: bucketed, measured_where: ['ddp.bucket_size_mb={bucket_mb}', "
                                       "'rank=']"));
  EXPECT_EQ(metric_number(r, "buckets"), metric_number(r, "measured_buckets"));
  EXPECT_GT(metric_number(r, "interference_ms_per_gb"), 0.0);
  EXPECT_LT(std::abs(metric_number(r, "step_error_pct")), 5.0);
  EXPECT_EQ(metric_text(r, "interconnect"), "NVLink");
  EXPECT_LE(metric_number(r, "efficiency"), 1.0);
}

TEST_F(ScalingTask, KappaComesFromTheCalibrationRunWhateverTheModel) {
  const std::string calibration = "interference: calibrated, calibration_file: '" + data("ddp_benchmarking/data") +
                                  "', calibration_part: bucketed, calibration_where: ['ddp.bucket_size_mb=100', "
                                  "'rank='], calibration_baseline_part: single_gpu, calibration_baseline_where: "
                                  "['rank='], calibration_model: {name: transformer_lm, size: xl, context_length: 256}";
  const auto xl = run_task_once("scaling_model", options("gpus: 8, " + calibration));
  const auto big = run_task_once(
      "scaling_model",
      "{model: {name: transformer_lm, size: 2.7B, context_length: 256}, bucket_mb: 100, gpus: 8, step_file: '" +
          data("train_step_vs_pytorch/data") + "', step_part: cpp, step_where: ['model.size=2.7B', 'precision=fp32'], " +
          "fit_file: '" + data("distributed_communication_single_node/data") + "', fit_part: nccl, fit_where: ['rank='], " +
          calibration + "}");
  EXPECT_DOUBLE_EQ(metric_number(big, "interference_ms_per_gb"), metric_number(xl, "interference_ms_per_gb"));
  for (const auto* r : {&xl, &big}) {
    EXPECT_LT(metric_number(*r, "efficiency"), 1.0);  // interference only ever slows backward
    EXPECT_GT(metric_number(*r, "backward_ms"), metric_number(*r, "one_gpu_backward_ms"));
  }
  // The calibration model must be the one the calibration run trained.
  EXPECT_THROW(run_task_once("scaling_model", options("gpus: 8, " + calibration.substr(0, calibration.find(", calibration_model")) +
                                                      ", calibration_model: {name: transformer_lm, size: large}")),
               std::invalid_argument);
}

TEST_F(ScalingTask, ManyNodesCostEfficiency) {
  const auto one = run_task_once("scaling_model", options("gpus: 1"));
  EXPECT_DOUBLE_EQ(metric_number(one, "efficiency"), 1.0);
  EXPECT_EQ(metric_text(one, "interconnect"), "none");
  const auto node = run_task_once("scaling_model", options("gpus: 8"));
  const auto many = run_task_once("scaling_model", options("gpus: 1024"));
  EXPECT_EQ(metric_number(many, "nodes"), 128.0);
  EXPECT_LT(metric_number(many, "efficiency"), metric_number(node, "efficiency"));
  EXPECT_DOUBLE_EQ(metric_number(many, "busbw_gbps"), 50.0);
}

TEST_F(ScalingTask, AStepOfAnotherModelSizeIsRefused) {
  EXPECT_THROW(run_task_once("scaling_model",
                             "{model: {name: transformer_lm, size: large, context_length: 256}, step_file: '" +
                                 data("ddp_benchmarking/data") + "', step_part: single_gpu, step_where: ['rank='], "
                                 "fit_file: '" + data("distributed_communication_single_node/data") +
                                 "', fit_part: nccl, fit_where: ['rank=']}"),
               std::invalid_argument);
}

// The 4xH100 host measured 2 and 4 processes in separate runs: fit_files reads each
// count from its own run, so 4 ranks use the 4-process curve, not the 2-process one.
TEST_F(ScalingTask, FitFilesReadEachProcessCountFromItsOwnRun) {
  const std::string two = data("distributed_communication_single_node/runs/h100_host_2_processes");
  const std::string four = data("distributed_communication_single_node/runs/h100_host_4_processes");
  auto with = [&](const std::string& fit) {
    return "{model: {name: transformer_lm, size: xl, context_length: 256}, bucket_mb: 100, step_file: '" +
           data("scaling_model/inputs/ddp_scaling_4xh100_2_gpus") + "', step_part: single_gpu, step_where: ['rank='], fit_part: nccl, " +
           "fit_where: ['impl=runner', 'rank='], gpus_per_node: 4, " + fit + "}";
  };
  const std::string both = "fit_processes: [2, 4], fit_files: ['" + two + "', '" + four + "']";
  const auto at2 = run_task_once("scaling_model", with("gpus: 2, " + both));
  const auto at4 = run_task_once("scaling_model", with("gpus: 4, " + both));
  const auto only2 = run_task_once("scaling_model", with("gpus: 2, fit_processes: [2], fit_file: '" + two + "'"));
  const auto only4 = run_task_once("scaling_model", with("gpus: 4, fit_processes: [4], fit_file: '" + four + "'"));
  EXPECT_DOUBLE_EQ(metric_number(at2, "busbw_gbps"), metric_number(only2, "busbw_gbps"));
  EXPECT_DOUBLE_EQ(metric_number(at4, "busbw_gbps"), metric_number(only4, "busbw_gbps"));
  EXPECT_DOUBLE_EQ(metric_number(at4, "alpha_us"), metric_number(only4, "alpha_us"));
  EXPECT_NE(metric_number(at4, "busbw_gbps"), metric_number(at2, "busbw_gbps"));
  EXPECT_NE(metric_text(at4, "derivation").find("4 ranks use 4-rank fit"), std::string::npos)
      << metric_text(at4, "derivation");
  EXPECT_NE(metric_text(at4, "derivation").find("h100_host_4_processes"), std::string::npos);

  // One file per count, in order, and never beside fit_file.
  auto refused = [&](const std::string& fit, const std::string& says) {
    try {
      run_task_once("scaling_model", with("gpus: 4, " + fit));
      ADD_FAILURE() << fit << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(both + ", fit_file: '" + two + "'", "fit_file and fit_files are both set");
  refused("fit_processes: [2, 4], fit_files: ['" + two + "']", "one file per count");
  refused("fit_processes: [4, 2], fit_files: ['" + two + "', '" + four + "']", "processes has 2");
  refused("fit_processes: [2, 2], fit_files: ['" + two + "', '" + two + "']", "lists 2 twice");
}

TEST_F(ScalingTask, PreflightNamesTheEmptyFileAndTheSelectionThatMatchesNothing) {
  const runner::PluginManifest* m = registry.find(runner::PluginKind::Task, "scaling_model");
  ASSERT_NE(m, nullptr);
  const runner::Params empty = runner::resolve_plugin_options(registry, runner::PluginKind::Task, "scaling_model", "{}");
  try {
    m->preflight(empty);
    FAIL() << "step_file is empty";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("step_file is empty"), std::string::npos) << e.what();
  }
  const runner::Params wrong = runner::resolve_plugin_options(registry, runner::PluginKind::Task, "scaling_model",
                                                              options("fit_processes: [16]"));
  try {
    m->preflight(wrong);
    FAIL() << "no 16-process all-reduce records";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("processes has 2"), std::string::npos) << e.what();
  }
}

}  // namespace
