// Multi-process points on a worker pool: a `processes: 2` point takes two of the
// `--workers` at once and runs as its own 2-rank Gloo launch. A sweep mixing them with
// 1-process points records what separate serial runs record (timings aside), in sweep
// order; a point that needs more workers than the pool has is refused before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "record_lines.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

// The 2-rank part sits between 1-process parts, so the pool must hold later points
// back and still append in sweep order.
const char* kMixed = R"(experiment: mixed_pool
device: cpu
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: one, task: echo, params: {sleep_us: 150000}, sweep: {value: [1, 2, 3, 4]}}
  - name: pair
    processes: 2
    task: echo
    params: {sleep_us: 150000}
    sweep: {value: [5, 6]}
  - {name: after, task: echo, params: {sleep_us: 150000}, sweep: {value: [8, 9, 10, 11]}}
)";

// The comparable records of `run` (record_lines.hpp) of one part, in file order.
std::vector<std::string> part_records(const std::filesystem::path& run, const std::string& part) {
  std::vector<std::string> out;
  for (const std::string& line : report::comparable_records(run / "results.jsonl"))
    if (nlohmann::json::parse(line)["part"] == part) out.push_back(line);
  return out;
}

TEST(WorkersRanks, MixedSweepOnThreeWorkersRecordsWhatSerialRunsRecord) {
  const auto dir = fresh_dir("workers-ranks");
  const auto file = write_file(dir / "mixed.yaml", kMixed);
  const auto pooled = run_runner(file.string() + " --workers 3 --out " + (dir / "pool").string());
  ASSERT_EQ(pooled.exit_code, 0) << pooled.output;
  // Serially: the 1-process parts in one process, the 2-rank part under runner launch.
  const auto single = run_runner(file.string() + " --filter '^(one|after) ' --out " + (dir / "single").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ranks = run_runner("launch --nproc-per-node 2 " + file.string() + " --filter '^pair ' --out " +
                                (dir / "ranks").string());
  ASSERT_EQ(ranks.exit_code, 0) << ranks.output;
  std::vector<std::string> serial = part_records(dir / "single", "one");
  for (const auto& r : part_records(dir / "ranks", "pair")) serial.push_back(r);
  for (const auto& r : part_records(dir / "single", "after")) serial.push_back(r);
  EXPECT_EQ(serial.size(), 4u + 2u * 3u + 4u);  // a 2-rank point: each rank's record and their aggregate
  EXPECT_EQ(report::comparable_records(dir / "pool" / "results.jsonl"), serial);

  // Each record names where it ran: a 1-process point one worker, a 2-rank point two
  // distinct ones (each rank its own).
  std::map<int, std::set<int>> pair_workers;
  for (const auto& r : report::read_result_lines(dir / "pool" / "results.jsonl")) {
    const auto& env = r["env"];
    ASSERT_TRUE(env.contains("worker")) << r.dump();
    const int worker = env["worker"].get<int>();
    EXPECT_TRUE(worker >= 0 && worker < 3) << r.dump();
    if (r["part"] != "pair") {
      EXPECT_FALSE(env.contains("workers")) << r.dump();
      continue;
    }
    ASSERT_TRUE(env.contains("workers")) << r.dump();
    const auto slots = env["workers"].get<std::vector<int>>();
    ASSERT_EQ(slots.size(), 2u) << r.dump();
    EXPECT_NE(slots[0], slots[1]);
    EXPECT_EQ(env["world_size"], 2) << r.dump();
    if (r["labels"].contains("rank")) {
      EXPECT_EQ(worker, slots[std::stoul(r["labels"]["rank"].get<std::string>())]) << r.dump();
      pair_workers[r["point"].get<int>()].insert(worker);
    }
  }
  EXPECT_EQ(pair_workers.size(), 2u);
  for (const auto& [point, workers] : pair_workers) EXPECT_EQ(workers.size(), 2u) << "pair point " << point;
  EXPECT_NE(pooled.output.find("[10/10] "), std::string::npos) << pooled.output;
  EXPECT_NE(pooled.output.find("(workers "), std::string::npos) << pooled.output;
}

TEST(WorkersRanks, TwoRankPointOnOneWorkerIsRefusedUpFront) {
  const auto dir = fresh_dir("workers-ranks-refused");
  const auto file = write_file(dir / "mixed.yaml", kMixed);
  const auto r = run_runner(file.string() + " --workers 1 --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(file.string() + ":7:16: parts.pair.processes: 2: each of its points runs on 2 workers at "
                                          "once and this pool has 1; use --workers 2 or more"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "the run started before the refusal";
  // Without a pool it names the pool and the launch that run it.
  const auto alone = run_runner(file.string() + " --out " + (dir / "alone").string());
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("parts.pair.processes: 2: its points run on 2 ranks; run the sweep on a pool, "
                              "--workers 2 or more"),
            std::string::npos)
      << alone.output;
  // A launch would put the 1-process parts on both ranks.
  const auto launched =
      run_runner("launch --nproc-per-node 2 " + file.string() + " --out " + (dir / "launched").string());
  EXPECT_EQ(launched.exit_code, 2) << launched.output;
  EXPECT_NE(launched.output.find("part one (no processes: key, so 1 process): this launch runs every point on its 2 "
                                 "ranks"),
            std::string::npos)
      << launched.output;
}

// A part that sets `processes: 1` under an experiment-wide `processes: 2` runs serially when
// the filter leaves only its points (the experiment's count binds only the parts without one).
TEST(WorkersRanks, OneProcessPartOfATwoRankExperimentRunsSerially) {
  const auto dir = fresh_dir("workers-ranks-serial-part");
  const auto file = write_file(dir / "ranked.yaml", R"(experiment: ranked
device: cpu
processes: 2
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: alone, processes: 1, task: echo, sweep: {value: [1, 2]}}
  - {name: pair, task: echo, sweep: {value: [3]}}
)");
  const auto r = run_runner(file.string() + " --filter '^alone ' --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(part_records(dir / "run", "alone").size(), 2u) << r.output;
  // The part without its own count still needs the experiment's two ranks.
  const auto pair = run_runner(file.string() + " --filter '^pair ' --out " + (dir / "pair").string());
  EXPECT_EQ(pair.exit_code, 2) << pair.output;
  EXPECT_NE(pair.output.find("processes: 2: its points run on 2 ranks"), std::string::npos) << pair.output;
}

// First come, first served: a 2-rank point waiting for both workers is not overtaken by
// the 1-process points after it (which could keep one worker busy forever), so on two
// workers it finishes third, after the two points before it and before any after it.
TEST(WorkersRanks, AWaitingTwoRankPointIsNotOvertaken) {
  const auto dir = fresh_dir("workers-ranks-fifo");
  const auto file = write_file(dir / "fifo.yaml", R"(experiment: fifo_pool
device: cpu
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: before, task: echo, params: {sleep_us: 300000}, sweep: {value: [1, 2]}}
  - {name: pair, processes: 2, task: echo, params: {sleep_us: 10000}}
  - {name: later, task: echo, params: {sleep_us: 10000}, sweep: {value: [3, 4, 5, 6]}}
)");
  const auto r = run_runner(file.string() + " --workers 2 --out " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[3/7] pair "), std::string::npos) << r.output;
}

// A 2-rank point whose rank crashes costs only that point: its launch stops the other
// rank, the point is recorded as an error, and the pool goes on with the points after it.
TEST(WorkersRanks, ATwoRankPointThatCrashesCostsOnlyItsPoint) {
  const auto dir = fresh_dir("workers-ranks-crash");
  const auto file = write_file(dir / "crash.yaml", R"(experiment: crash_pair_pool
device: cpu
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - {name: ok, task: echo, params: {sleep_us: 20000}, sweep: {value: [1, 2]}}
  - {name: dies, processes: 2, task: echo, params: {fail: crash}}
  - {name: after, task: echo, params: {sleep_us: 20000}, sweep: {value: [3, 4]}}
)");
  const auto r = run_runner(file.string() + " --workers 2 --out " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::map<std::string, std::vector<std::string>> statuses;
  for (const auto& rec : report::read_result_lines(dir / "run" / "results.jsonl"))
    statuses[rec["part"].get<std::string>() + std::to_string(rec["point"].get<int>())].push_back(rec["status"]);
  using List = std::vector<std::string>;
  EXPECT_EQ(statuses, (std::map<std::string, List>{
                          {"ok0", {"ok"}}, {"ok1", {"ok"}}, {"dies0", {"error"}}, {"after0", {"ok"}}, {"after1", {"ok"}}}))
      << r.output;
  EXPECT_NE(r.output.find("[3/5] dies (single point)  error  (workers 0, 1)"), std::string::npos) << r.output;
}

// Killed while its first 2-rank point runs (as by a scheduler): that point is recorded
// interrupted, and --resume on the same pool runs every missing point once.
TEST(WorkersRanks, AKilledMixedPoolResumesAndRunsEachPointOnce) {
  const auto dir = fresh_dir("workers-ranks-resume");
  std::string yaml = kMixed;
  yaml.replace(yaml.find("sleep_us: 150000}\n    sweep: {value: [5"), 16, "sleep_us: 1500000");
  const auto file = write_file(dir / "mixed.yaml", yaml);
  const auto run = dir / "run";
  // Rank 1's log appears once the ranks of the first 2-rank point (sweep position 4) have met.
  run_runner("", std::string(RUNNER_EXE) + " " + file.string() + " --workers 3 --out " + run.string() +
                     " & pid=$!; for i in $(seq 1200); do [ -f " + (run / "workers" / "point-4" / "log.rank1.txt").string() +
                     " ] && break; sleep 0.1; done; sleep 0.5; kill -TERM $pid; wait $pid; exit 0;");
  const auto statuses = [&] {
    std::map<std::string, std::vector<std::string>> of;  // part-point -> status of each point's first record
    for (const auto& r : report::read_result_lines(run / "results.jsonl"))
      if (r["point_record"][0] == 1) of[r["part"].get<std::string>() + "-" + std::to_string(r["point"].get<int>())].push_back(r["status"]);
    return of;
  };
  const auto before = statuses();
  ASSERT_EQ(before.count("pair-0"), 1u) << read_file(run / "log.txt");
  EXPECT_EQ(before.at("pair-0"), std::vector<std::string>{"interrupted"});
  EXPECT_EQ(before.count("after-3"), 0u) << "the kill came after the sweep finished";
  const auto resumed = run_runner(file.string() + " --workers 3 --resume " + run.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = statuses();
  EXPECT_EQ(after.size(), 10u);
  for (const auto& [point, seen] : after) {
    const std::vector<std::string> ok = {"ok"};
    const std::vector<std::string> retried = {"interrupted", "ok"};
    EXPECT_TRUE(seen == ok || (point == "pair-0" && seen == retried)) << point << " recorded " << seen.size() << " times";
  }
}

// A table of points that ran on several GPUs each says so, not "one per GPU".
TEST(WorkersRanks, CaptionSaysPointsRanOnSeveralGpusEach) {
  const auto rec = [](int size, const nlohmann::json& env) {
    return nlohmann::json{{"experiment", "x"}, {"part", "main"}, {"point", size}, {"status", "ok"},
                          {"params", {{"size", size}}}, {"labels", nlohmann::json::object()},
                          {"metrics", {{"tflops", {{"unit", "TFLOP/s"}, {"value", 1.0}}}}}, {"env", env}};
  };
  const auto spec = report::parse_report_spec(
      YAML::Load("{id: r, tables: [{name: t, rows: [size], columns: [{metric: tflops}]}]}"), "test.yaml");
  const std::vector<nlohmann::json> one_each = {rec(1, {{"worker", 0}, {"gpu_index", 2}}),
                                                rec(2, {{"worker", 1}, {"gpu_index", 3}})};
  EXPECT_NE(report::build_table(spec.tables.at(0), one_each).caption.find(
                "points ran concurrently, one per GPU, on GPUs 2, 3 of the host"),
            std::string::npos);
  const std::vector<nlohmann::json> pairs = {
      rec(1, {{"worker", 0}, {"workers", {0, 1}}, {"gpu_index", 0}, {"gpu_indices", {0, 1}}}),
      rec(2, {{"worker", 2}, {"workers", {2, 3}}, {"gpu_index", 2}, {"gpu_indices", {2, 3}}})};
  const std::string caption = report::build_table(spec.tables.at(0), pairs).caption;
  EXPECT_NE(caption.find("points ran concurrently, each on its own GPUs, on GPUs 0, 1, 2, 3 of the host"),
            std::string::npos)
      << caption;
}

}  // namespace
}  // namespace runner
