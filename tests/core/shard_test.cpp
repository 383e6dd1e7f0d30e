// A sweep split into shards (--shard I/N) and joined again (runner merge): the
// merged run has every point of an unsharded run exactly once, with the same
// records apart from timings, and shards that do not belong together are refused.
#include <gtest/gtest.h>

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

// 12 points over two parts (8 + 4), so a shard crosses the part boundary.
const char* kTwelve = R"(experiment: twelve
measure: {warmup_steps: 0, measured_steps: 1}
parts:
  - name: a
    task: echo
    params: {labels: [x, y]}
    sweep: {value: [1, 2, 3, 4], word: [hi, ho]}
  - name: b
    task: echo
    sweep: {value: [10, 20, 30, 40]}
report:
  id: twelve
  tables:
    - {name: values, rows: [word, item], pivot: value, metric: value, format: "%.0f"}
)";

std::set<std::pair<std::string, int>> point_set(const std::filesystem::path& results) {
  std::set<std::pair<std::string, int>> points;
  for (const auto& r : report::read_result_lines(results)) points.emplace(r["part"], r["point"].get<int>());
  return points;
}

std::string shard_run(const std::filesystem::path& file, const std::filesystem::path& dir, int i, int n,
                      const std::string& extra = "") {
  const auto out = dir / ("shard-" + std::to_string(i));
  const auto r = run_runner(file.string() + " --device cpu " + extra + " --shard " + std::to_string(i) + "/" +
                            std::to_string(n) + " --out " + out.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out.string();
}

TEST(Shard, FourShardsMergeIntoTheUnshardedRun) {
  const auto dir = fresh_dir("shard-merge");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  ASSERT_EQ(run_runner(file.string() + " --device cpu --out " + (dir / "whole").string()).exit_code, 0);
  std::string shards;
  std::set<std::pair<std::string, int>> union_of_shards;
  std::size_t records_in_shards = 0;
  for (int i = 0; i < 4; ++i) {
    shards += " " + shard_run(file, dir, i, 4);
    const auto results = dir / ("shard-" + std::to_string(i)) / "results.jsonl";
    const auto points = point_set(results);
    EXPECT_EQ(points.size(), 3u) << "shard " << i;
    union_of_shards.insert(points.begin(), points.end());
    records_in_shards += report::read_result_lines(results).size();
    EXPECT_NE(read_file(dir / ("shard-" + std::to_string(i)) / "config.yaml").find("# shard " + std::to_string(i) + "/4"),
              std::string::npos);
    EXPECT_NE(read_file(results).find("\"shard\":\"" + std::to_string(i) + "/4\""), std::string::npos);
  }
  EXPECT_EQ(union_of_shards.size(), 12u);
  EXPECT_EQ(records_in_shards, 20u);  // 8 points of two labels, 4 of one

  const auto merged = run_runner("merge" + shards + " --out " + (dir / "merged").string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(report::comparable_records(dir / "merged" / "results.jsonl"),
            report::comparable_records(dir / "whole" / "results.jsonl"));
  EXPECT_EQ(read_file(dir / "merged" / "reports" / "twelve" / "twelve.md"),
            read_file(dir / "whole" / "reports" / "twelve" / "twelve.md"));
  EXPECT_TRUE(std::filesystem::exists(dir / "merged" / "log.shard-3.txt"));
  // The merged run re-renders as a whole run (not partial).
  const auto again = run_runner("report " + (dir / "merged").string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("partial"), std::string::npos) << again.output;
}

TEST(Shard, SplitIsByPositionAndAShardReportsItsOwnPoints) {
  const auto dir = fresh_dir("shard-split");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto r = run_runner(file.string() + " --device cpu --shard 1/5 --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("twelve: 3 points"), std::string::npos) << r.output;  // positions 1, 6, 11
  EXPECT_NE(r.output.find("a[1] "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a[6] "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("b[3] "), std::string::npos) << r.output;
  const auto out = shard_run(file, dir, 1, 5);
  const auto report = run_runner("report " + out);
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_EQ(report.output.find("partial"), std::string::npos) << report.output;
}

TEST(Shard, BadShardsAreRefusedWithOneLine) {
  const auto dir = fresh_dir("shard-bad");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  for (const std::string bad : {"4/4", "1", "-1/2", "a/b", "0/0"}) {
    const auto r = run_runner(file.string() + " --device cpu --dry-run --shard " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.output.find("--shard '" + bad + "': expected I/N"), std::string::npos) << r.output;
  }
  const auto empty = run_runner(file.string() + " --device cpu --dry-run --shard 12/13");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.output.find("--shard 12/13: holds no points (the sweep has 12)"), std::string::npos) << empty.output;
  const auto filtered = run_runner(file.string() + " --device cpu --dry-run --shard 0/2 --filter b");
  EXPECT_EQ(filtered.exit_code, 2);
  EXPECT_NE(filtered.output.find("--shard and --filter"), std::string::npos) << filtered.output;
}

TEST(Shard, MergeRefusesShardsThatDoNotMakeOneSweep) {
  const auto dir = fresh_dir("shard-refuse");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const std::string s0 = shard_run(file, dir, 0, 2), s1 = shard_run(file, dir, 1, 2);
  const auto other = dir / "other";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --set parts.b.params.word=other --shard 1/2 --out " +
                       other.string()).exit_code, 0);
  const auto expect_refusal = [&](const std::string& args, const std::string& message) {
    const auto r = run_runner("merge " + args + " --out " + (fresh_dir("shard-merged") / "m").string());
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  };
  expect_refusal(s0 + " " + other.string(), "its resolved config differs from " + s0);
  expect_refusal(s0 + " " + s0, "are both shard 0/2 (overlapping shards)");
  expect_refusal(s0, "shard(s) 1 of 2 missing");
  expect_refusal(s0 + " " + (dir / "whole-missing").string(), "not a run directory");
  const auto four = shard_run(file, dir, 3, 4);
  expect_refusal(s0 + " " + four, "is shard 3/4");

  // A shard cut short (its last point's records removed) is named, with how to finish it.
  const auto cut = dir / "cut";
  std::filesystem::copy(s1, cut, std::filesystem::copy_options::recursive);
  std::string text = read_file(cut / "results.jsonl");
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  write_file(cut / "results.jsonl", text);
  expect_refusal(s0 + " " + cut.string(), "has no finished record of b[3]");
  // Resuming that shard finishes it, and the merge then succeeds.
  const auto resumed = run_runner(file.string() + " --device cpu --shard 1/2 --resume " + cut.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto merged = run_runner("merge " + s0 + " " + cut.string() + " --out " + (dir / "merged").string());
  EXPECT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(point_set(dir / "merged" / "results.jsonl").size(), 12u);
  // Resuming a shard as another shard (or as the whole sweep) is refused.
  const auto wrong = run_runner(file.string() + " --device cpu --shard 0/2 --resume " + cut.string());
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.output.find("the run is shard 1/2, not shard 0/2"), std::string::npos) << wrong.output;
}

// What Slurm never needs to see: runner submit refuses bad requests before sbatch.
TEST(Shard, SubmitRefusesBadRequestsWithOneLine) {
  const auto dir = fresh_dir("shard-submit");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto expect_refusal = [&](const std::string& args, const std::string& message) {
    const auto r = run_runner("submit " + file.string() + " --device cpu " + args + " --out " + (dir / "run").string());
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  };
  expect_refusal("--array 4", "runner submit: --slurm is required");
  expect_refusal("--slurm", "runner submit: --array N is required");
  expect_refusal("--slurm --array 0", "--array '0': expected a whole number of 1 or more");
  expect_refusal("--slurm --array 13", "--array 13: more tasks than the sweep's 12 points");
  expect_refusal("--slurm --array 2 --shard 0/2", "--shard is not for a submitted sweep");
  expect_refusal("--slurm --array 2 --set sweep.nope=[1]", "nope");  // the run's own check, through --dry-run
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
  // --dry-run prints both scripts and creates nothing.
  const auto dry = run_runner("submit " + file.string() + " --device cpu --slurm --array 3 --parallel 2 "
                              "--sbatch-arg=--partition=gpu --sbatch-arg=--gres=gpu:1 --dry-run --out " +
                              (dir / "run").string());
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  const std::vector<std::string> lines = {"#SBATCH --array=0-2%2", "#SBATCH --gres=gpu:1",
                                          "--shard \"$SLURM_ARRAY_TASK_ID/3\"", "--resume \"$shard\"", " merge ",
                                          "--out " + (dir / "run" / "merged").string()};
  for (const std::string& line : lines)
    EXPECT_NE(dry.output.find(line), std::string::npos) << line << "\n" << dry.output;
  // --partition goes to both jobs, --gres only to the array tasks.
  const size_t merge_script = dry.output.find("merge.sbatch");
  ASSERT_NE(merge_script, std::string::npos);
  EXPECT_NE(dry.output.find("#SBATCH --partition=gpu", merge_script), std::string::npos) << dry.output;
  EXPECT_EQ(dry.output.find("#SBATCH --gres=gpu:1", merge_script), std::string::npos) << dry.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(Shard, MergeRefusesShardsOfDifferentCommits) {
  const auto dir = fresh_dir("shard-commit");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  const auto s0 = dir / "s0";
  ASSERT_EQ(run_runner(file.string() + " --device cpu --shard 0/2 --out " + s0.string(), "RUNNER_GIT_COMMIT=aaaa")
                .exit_code, 0);
  const std::string s1 = shard_run(file, dir, 1, 2, "");
  const auto r = run_runner("merge " + s0.string() + " " + s1 + " --out " + (dir / "m").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ran at commit"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aaaa"), std::string::npos) << r.output;
}

// The project's reports (a folder with renders.txt) take records of a clean commit only, from
// `runner merge --reports` as from `runner report`: refused before the merged run is written,
// unless --allow-dirty, which every caption then states.
TEST(Shard, MergeIntoTheProjectsReportsRefusesADirtyCommitUnlessAllowed) {
  const auto dir = fresh_dir("shard-dirty");
  const auto file = write_file(dir / "twelve.yaml", kTwelve);
  std::filesystem::create_directories(dir / "committed");
  write_file(dir / "committed" / "renders.txt", "# the project's reports\n");
  std::string shards;
  for (int i = 0; i < 2; ++i) {
    const auto out = dir / ("s" + std::to_string(i));
    ASSERT_EQ(run_runner(file.string() + " --device cpu --shard " + std::to_string(i) + "/2 --out " + out.string(),
                         "RUNNER_GIT_COMMIT=0123456789ab-dirty")
                  .exit_code, 0);
    shards += " " + out.string();
  }
  const auto refused =
      run_runner("merge" + shards + " --out " + (dir / "m").string() + " --reports " + (dir / "committed").string());
  ASSERT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("records of commit 0123456789ab-dirty"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--allow-dirty"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "m"));
  EXPECT_FALSE(std::filesystem::exists(dir / "committed" / "twelve"));

  const auto allowed = run_runner("merge" + shards + " --out " + (dir / "m").string() + " --reports " +
                                  (dir / "committed").string() + " --allow-dirty");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  const std::string md = read_file(dir / "committed" / "twelve" / "twelve.md");
  EXPECT_NE(md.find("Rendered with --allow-dirty: records of commit 0123456789ab-dirty"), std::string::npos) << md;
  // Any other folder takes them as they are.
  ASSERT_EQ(run_runner("merge" + shards + " --out " + (dir / "m2").string() + " --reports " +
                       (dir / "scratch").string()).exit_code, 0);
  EXPECT_EQ(read_file(dir / "scratch" / "twelve" / "twelve.md").find("--allow-dirty"), std::string::npos);
}

}  // namespace
}  // namespace runner
