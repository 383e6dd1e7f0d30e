// `runner a.yaml b.yaml` (issue 51): several experiment files in one command run in turn,
// each into its own run directory, with one summary at the end and the worst exit code;
// a bad file stops the command before anything runs. And `runner list` marks the
// questions (`question:`) apart from the studies (experiments/studies/).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace runner {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_runner;
using testing::write_file;

std::string echo_experiment(const std::string& name, const std::string& fail) {
  return "experiment: " + name + "\nmeasure: {warmup_steps: 0, measured_steps: 1}\ntask: echo\nparams: {fail: " +
         fail + "}\nsweep: {value: [1.5, 2.5]}\n";
}

TEST(RunMany, EachExperimentRunsIntoItsOwnDirectoryAndOneSummaryCloses) {
  const auto dir = fresh_dir("run-many-ok");
  const auto a = write_file(dir / "first.yaml", echo_experiment("first", "none"));
  const auto b = write_file(dir / "second.yaml", echo_experiment("second", "none"));
  const auto r = run_runner(a.string() + " " + b.string() + " --device cpu --out " + (dir / "runs").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_file(dir / "runs" / "first" / "results.jsonl").find("\"experiment\":\"first\""), std::string::npos);
  EXPECT_NE(read_file(dir / "runs" / "second" / "results.jsonl").find("\"experiment\":\"second\""), std::string::npos);
  // In turn: the first one's summary before the second starts.
  const auto first = r.output.find("[1/2] " + a.string());
  const auto second = r.output.find("[2/2] " + b.string());
  ASSERT_NE(first, std::string::npos) << r.output;
  ASSERT_NE(second, std::string::npos) << r.output;
  EXPECT_LT(first, second);
  const auto summary = r.output.find("\nexperiment  ");
  ASSERT_NE(summary, std::string::npos) << r.output;
  EXPECT_GT(summary, second);
  EXPECT_NE(r.output.find("first       ok      ", summary), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((dir / "runs" / "second").string(), summary), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 experiments in ", summary), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(2 ok, 0 not)"), std::string::npos) << r.output;
}

TEST(RunMany, ExitCodeIsTheWorstAndAFailedExperimentDoesNotStopTheNext) {
  const auto dir = fresh_dir("run-many-fail");
  const auto bad = write_file(dir / "failing.yaml", echo_experiment("failing", "error"));
  const auto good = write_file(dir / "fine.yaml", echo_experiment("fine", "none"));
  const auto r = run_runner(bad.string() + " " + good.string() + " --device cpu --out " + (dir / "runs").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "runs" / "fine" / "results.jsonl")) << r.output;
  EXPECT_NE(r.output.find("failing     failed points"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(1 ok, 1 not)"), std::string::npos) << r.output;
}

TEST(RunMany, ABadFileStopsTheCommandBeforeAnythingRuns) {
  const auto dir = fresh_dir("run-many-bad");
  const auto good = write_file(dir / "good.yaml", echo_experiment("good", "none"));
  const auto typo = write_file(dir / "typo.yaml", echo_experiment("typo", "none") + "mesure: {}\n");
  const auto r = run_runner(good.string() + " " + typo.string() + " --device cpu --out " + (dir / "runs").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(typo.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mesure: unknown key"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "runs" / "good")) << r.output;
}

TEST(RunMany, ResumeNamesOneRunAndLaunchOneExperiment) {
  const auto dir = fresh_dir("run-many-resume");
  const auto a = write_file(dir / "a.yaml", echo_experiment("a", "none"));
  const auto b = write_file(dir / "b.yaml", echo_experiment("b", "none"));
  const auto resume = run_runner(a.string() + " " + b.string() + " --device cpu --resume " + dir.string());
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_NE(resume.output.find("continues one run; give one experiment with it"), std::string::npos)
      << resume.output;
  const auto launch = run_runner("launch --nproc-per-node 2 " + a.string() + " " + b.string() + " --device cpu");
  EXPECT_EQ(launch.exit_code, 2) << launch.output;
  EXPECT_NE(launch.output.find("runner launch runs one experiment"), std::string::npos) << launch.output;
}

TEST(ListKinds, QuestionsFirstStudiesApartAndACountOfEach) {
  const auto dir = fresh_dir("list-kinds");
  write_file(dir / "answer.yaml", echo_experiment("answer", "none") + "question: demo_question\n");
  write_file(dir / "extra.yaml", echo_experiment("extra", "none"));
  std::filesystem::create_directories(dir / "studies");
  write_file(dir / "studies" / "ab.yaml", echo_experiment("ab", "none"));
  const auto r = run_runner("list " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto question = r.output.find("  question demo_question  ");
  const auto other = r.output.find("  other  ");
  const auto study = r.output.find("  study  ");
  ASSERT_NE(question, std::string::npos) << r.output;
  ASSERT_NE(other, std::string::npos) << r.output;
  ASSERT_NE(study, std::string::npos) << r.output;
  EXPECT_LT(question, other);
  EXPECT_LT(other, study);
  EXPECT_NE(r.output.find("1 question (1 file), 1 other experiment, 1 study\n"), std::string::npos) << r.output;
  write_file(dir / "own.yaml", echo_experiment("own", "none") + "question: own\n");  // named after its question
  const auto own = run_runner("list " + dir.string());
  EXPECT_NE(own.output.find("  question  "), std::string::npos) << own.output;
  EXPECT_NE(own.output.find("2 questions (2 files)"), std::string::npos) << own.output;
  write_file(dir / "listed_question.yaml", echo_experiment("lq", "none") + "question: [a, b]\n");
  const auto bad = run_runner("list " + dir.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("question: expected the id of the question this experiment answers"), std::string::npos)
      << bad.output;
}

TEST(ListKinds, TheProjectHasNineteenQuestions) {
  const auto r = run_runner(std::string("list ") + RUNNER_SOURCE_DIR + "/experiments");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("19 questions ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("studies/flash_head_group.yaml"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace runner
