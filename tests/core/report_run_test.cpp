// Captions and re-rendering that say what actually happened in the run: device
// and timer from the records, smoke and partial runs, cells with no record, and
// records cut off by a kill.
#include <gtest/gtest.h>

#include "report/report.hpp"
#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner::report {
namespace {

using nlohmann::json;
using testing::fresh_dir;
using testing::write_file;

json env(const std::string& device) {
  json e = {{"device", device}, {"libtorch", "2.11.0"}, {"cuda_runtime", "13.0"}, {"driver", "580.159.04"}};
  if (device == "cuda") e["gpu"] = "NVIDIA H100 80GB HBM3";
  else e["cpu"] = "AMD EPYC 7B13";
  return e;
}

json timed_record(const std::string& device, int point, const std::string& size) {
  return {{"experiment", "x"}, {"part", "main"}, {"point", point}, {"status", "ok"},
          {"params", {{"size", size}}}, {"labels", json::object()},
          {"metrics", {{"time_ms", {{"unit", "ms"}, {"n", 3}, {"mean", 1.0}, {"std", 0.01}, {"median", 1.0},
                                    {"min", 0.9}, {"max", 1.1}}}}},
          {"env", env(device)}};
}

TableSpec pivot_table() {
  return parse_report_spec(YAML::Load("{id: r, tables: [{name: t, rows: [size], columns: [{metric: time_ms}]}]}"),
                           "f.yaml")
      .tables[0];
}

TEST(RunCaption, CpuRunNamesNoCudaVersionOrDriverAndSaysTheSteadyClock) {
  const std::string caption = build_table(pivot_table(), stored({timed_record("cpu", 0, "1")})).caption;
  EXPECT_EQ(caption, "Setup: AMD EPYC 7B13 (cpu), LibTorch 2.11.0; timed with the host's steady clock.");
}

TEST(RunCaption, CudaRunSaysCudaEvents) {
  const std::string caption = build_table(pivot_table(), stored({timed_record("cuda", 0, "1")})).caption;
  EXPECT_NE(caption.find("driver 580.159.04, CUDA 13.0"), std::string::npos) << caption;
  EXPECT_NE(caption.find("timed with CUDA events"), std::string::npos) << caption;
}

TEST(RunCaption, TimerNamedByTheRecordWins) {
  json r = timed_record("cuda", 0, "1");
  r["timer"] = "steady_clock";
  EXPECT_NE(build_table(pivot_table(), stored({r})).caption.find("timed with the host's steady clock"), std::string::npos);
}

TEST(RunCaption, CellsWithoutARecordAreExplained) {
  json other = timed_record("cpu", 1, "2");
  other["metrics"] = {{"flop", {{"unit", "FLOP"}, {"value", 1}}}};
  const auto spec = parse_report_spec(
      YAML::Load("{id: r, tables: [{name: t, rows: [size], columns: [{metric: time_ms}, {metric: flop}]}]}"), "f")
                        .tables[0];
  const BuiltTable table = build_table(spec, stored({timed_record("cpu", 0, "1"), other}));
  EXPECT_NE(table.caption.find("– = no record for this cell"), std::string::npos) << table.caption;
  EXPECT_EQ(build_table(pivot_table(), stored({timed_record("cpu", 0, "1")})).caption.find("– ="), std::string::npos);
}

TEST(RunCaption, SmokeAndPartialRunsAreFlaggedInEveryCaption) {
  const auto dir = fresh_dir("run-caption");
  const auto spec = parse_report_spec(
      YAML::Load("{id: r, tables: [{name: t, rows: [size], columns: [{metric: time_ms}]}]}"), "f");
  const std::vector<json> records = {timed_record("cpu", 0, "1"), timed_record("cpu", 3, "2")};
  write_report(spec, records, dir, RunSummary{true, 23});
  const std::string md = testing::read_file(dir / "r" / "r.md");
  EXPECT_NE(md.find("*Smoke run (--smoke): the experiment's smoke overrides shrink sizes and steps"),
            std::string::npos) << md;
  EXPECT_NE(md.find("Partial run: records for 2 of 23 points."), std::string::npos) << md;
  EXPECT_EQ(run_sentence(RunSummary{false, 2}, records), "");
}

TEST(RunCaption, MergedSlicesCountPointsByParametersNotIndex) {
  // Two slices of one sweep each number their single point 0; together they are 2 points.
  const json a = timed_record("cuda", 0, "1");
  const json b = timed_record("cuda", 0, "2");
  EXPECT_EQ(recorded_points(stored({a, b})), 2u);
  EXPECT_EQ(recorded_points(stored({a, a})), 1u);
  json interrupted = b;
  interrupted["status"] = "interrupted";
  EXPECT_EQ(recorded_points(stored({a, interrupted})), 1u);
  EXPECT_EQ(run_sentence(RunSummary{false, 2}, stored({a, b})), "");
}

// quickstart's caption typed "Batch 4 x 64 tokens" and its title "2-layer, d_model 64": with
// --set parts.train.params.batch_size=8 the caption said batch 4, then `fixed: batch_size=8`.
// What the records hold is said once, by the Setup sentence.
TEST(RunCaption, AnOverrideIsSaidOnceAndNotContradicted) {
  const auto dir = fresh_dir("caption-override");
  const auto r = testing::run_runner(std::string(RUNNER_SOURCE_DIR) +
                                     "/experiments/quickstart.yaml --smoke --device cpu --filter '^train' "
                                     "--set parts.train.params.batch_size=8 --set parts.train.params.model.d_model=32 "
                                     "--out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = testing::read_file(dir / "run" / "reports" / "quickstart" / "quickstart.md");
  const size_t title = md.find("One train step");
  ASSERT_NE(title, std::string::npos) << md;
  const size_t caption = md.find("\n*", title);  // the table's caption line
  ASSERT_NE(caption, std::string::npos) << md;
  const std::string line = md.substr(caption + 1, md.find('\n', caption + 1) - caption - 1);
  EXPECT_NE(line.find("batch_size=8"), std::string::npos) << line;
  EXPECT_NE(line.find("d_model 32"), std::string::npos) << line;
  for (const char* stale : {"Batch 4", "batch_size=4", "d_model 64", "2-layer"}) {
    EXPECT_EQ(line.find(stale), std::string::npos) << stale << " in: " << line;
    EXPECT_EQ(md.substr(title, 200).find(stale), std::string::npos) << stale << " in the title";
  }
}

TEST(ReadResults, TruncatedLastRecordIsSkippedWithAWarning) {
  const auto file = write_file(fresh_dir("truncated") / "results.jsonl",
                               "{\"point\": 0, \"status\": \"ok\"}\n{\"point\": 1, \"status\": \"ok\"}\n{\"point\": 2, \"sta");
  std::vector<std::string> warnings;
  const auto records = read_results(file, &warnings);
  EXPECT_EQ(records.size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], file.string() + ":3: skipped a truncated last record (the run was killed while writing it)");
}

TEST(ReadResults, MalformedRecordBeforeTheLastIsStillAnError) {
  const auto file = write_file(fresh_dir("truncated") / "results.jsonl",
                               "{\"point\": 0}\n{\"point\": 1, \"sta\n{\"point\": 2}\n");
  EXPECT_THROW(read_results(file), std::runtime_error);
}

}  // namespace
}  // namespace runner::report
