#include <gtest/gtest.h>

#include <c10/util/Exception.h>
#include <signal.h>

#include <sstream>

#include "subprocess.hpp"
#include "task_harness.hpp"

namespace {

class ExternalPythonTest : public runner::testing::TaskTest {
 protected:
  std::vector<runner::Record> run(const std::string& behave, const std::string& extra = "") {
    runner::Context ctx;
    ctx.precision = runner::Precision::parse("bf16");
    ctx.seed = 7;
    ctx.measure.warmup_steps = 2;
    ctx.measure.measured_steps = 3;
    const std::string yaml = std::string("{script: ") + RUNNER_SOURCE_DIR +
                             "/plugins/task/external_python/testdata/fake_bench.py, python: " + RUNNER_PYTHON +
                             ", args: [--behave, " + behave + "], model: {name: transformer_lm, size: xl}" + extra + "}";
    return run_task("external_python", yaml, ctx);
  }
};

TEST_F(ExternalPythonTest, RecordLineBecomesLabelsStatsScalarsAndText) {
  const auto records = run("ok");
  ASSERT_EQ(records.size(), 1u);
  const auto& r = records[0];
  EXPECT_EQ(r.labels.at("impl"), "pytorch");
  const auto& step = std::get<runner::Stats>(r.find("step_ms")->value);
  EXPECT_EQ(step.n, 3);
  EXPECT_DOUBLE_EQ(step.mean, 2.0);
  EXPECT_EQ(r.find("step_ms")->unit, "ms");
  EXPECT_DOUBLE_EQ(std::get<double>(r.find("peak_memory_bytes")->value), 1024.0);
}

TEST_F(ExternalPythonTest, PassesDeviceSeedMeasureSettingsPrecisionAndModelOptions) {
  const auto r = run("ok").at(0);
  const std::string flags = std::get<std::string>(r.find("flags")->value);
  for (const char* expected : {"device=cpu", "precision=bf16", "seed=7", "warmup=2", "steps=3",
                               "model=transformer_lm", "model.size=xl"})
    EXPECT_NE(flags.find(expected), std::string::npos) << expected << " not in: " << flags;
  EXPECT_EQ(r.labels.at("size"), "xl");
}

TEST_F(ExternalPythonTest, AdaptiveSettingsArePassedAndTheScriptsMeasurementIsKept) {
  runner::Context ctx;
  ctx.plugins = &registry;
  ctx.measure.target_rel_stderr = 0.02;
  ctx.measure.min_steps = 3;
  ctx.measure.max_steps = 7;
  ctx.measure.max_seconds = 5;
  ctx.measure.repetitions = 2;
  const runner::Params params = runner::resolve_plugin_options(
      registry, runner::PluginKind::Task, "external_python",
      std::string("{script: ") + RUNNER_SOURCE_DIR + "/plugins/task/external_python/testdata/fake_bench.py, python: " +
          RUNNER_PYTHON + "}");
  runner::RecordList out;
  ctx.create<runner::Task>(runner::PluginKind::Task, params)->run(ctx, params, out);
  ASSERT_EQ(out.records.size(), 1u);
  const std::string flags = std::get<std::string>(out.records[0].find("flags")->value);
  for (const char* expected : {"target_rel_stderr=0.02", "min_steps=3", "max_steps=7", "max_seconds=5", "repetitions=2",
                               "cache=warm"})
    EXPECT_NE(flags.find(expected), std::string::npos) << expected << " not in: " << flags;
  EXPECT_EQ(std::get<runner::Stats>(out.records[0].find("step_ms")->value).repetition_means,
            (std::vector<double>{1.5, 2.5}));
  ASSERT_EQ(ctx.measurements.size(), 1u);
  EXPECT_EQ(ctx.measurements[0].mode, "adaptive");
  EXPECT_EQ(ctx.measurements[0].stop_reason, "target");
  EXPECT_TRUE(ctx.measurements[0].target_met);
  EXPECT_EQ(ctx.measurements[0].repetitions, 2);
}

TEST_F(ExternalPythonTest, NonZeroExitThrowsWithStderrTail) {
  try {
    run("fail");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("something broke"), std::string::npos) << e.what();
  }
}

TEST_F(ExternalPythonTest, OomLineMakesThePointOom) {
  EXPECT_THROW(run("oom"), c10::OutOfMemoryError);
}

TEST_F(ExternalPythonTest, NoRecordLineIsAnError) {
  EXPECT_THROW(run("silent"), std::runtime_error);
}

TEST_F(ExternalPythonTest, MissingScriptNamesThePath) {
  EXPECT_THROW(
      {
        try {
          run_task("external_python", "{script: no/such/script.py}");
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("no/such/script.py"), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
}

}  // namespace

namespace interpreter {

using plugins::external_python::check_interpreter;
using plugins::external_python::python_executable;

// RUNNER_PYTHON of this build is the interpreter setup.sh took LibTorch from.
TEST(ExternalPythonInterpreter, DefaultIsTheInterpreterWhosePyTorchTheBuildUsed) {
  const char* saved = std::getenv("RUNNER_PYTHON");
  const std::string saved_value = saved ? saved : "";
  unsetenv("RUNNER_PYTHON");
  EXPECT_EQ(python_executable(""), RUNNER_PYTHON);
  setenv("RUNNER_PYTHON", "/opt/other/python", 1);
  EXPECT_EQ(python_executable(""), "/opt/other/python");
  EXPECT_EQ(python_executable("/from/params"), "/from/params");
  if (saved) setenv("RUNNER_PYTHON", saved_value.c_str(), 1);
  else unsetenv("RUNNER_PYTHON");
}

TEST(ExternalPythonInterpreter, InterpreterWithoutTorchIsRefusedWithHowToChooseAnother) {
  try {
    check_interpreter("/bin/false");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "interpreter '/bin/false' cannot import torch; choose one that can with "
              "RUNNER_PYTHON=/path/to/python or params.python");
  }
  EXPECT_THROW(check_interpreter("/nonexistent/python3"), std::runtime_error);
  EXPECT_NO_THROW(check_interpreter(RUNNER_PYTHON));
}

}  // namespace interpreter

namespace spawn_state {

// The host blocks SIGINT and SIGTERM in its threads (interrupt.cpp) and may ignore
// signals; a script started from there must not inherit either, or the SIGTERM
// that asks it to stop does nothing and only the SIGKILL 5 s later ends it. It
// leads a process group of its own, so the host can end it with its children.
TEST(ExternalPythonSubprocess, ChildStartsWithNoBlockedOrIgnoredSignalsInItsOwnProcessGroup) {
  sigset_t term, previous;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  pthread_sigmask(SIG_BLOCK, &term, &previous);
  struct sigaction ignore {}, old_usr1 {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR1, &ignore, &old_usr1);
  const auto result = plugins::external_python::run_process(
      {"sh", "-c", "echo $$; cut -d' ' -f5 /proc/$$/stat; exec grep -E '^Sig(Blk|Ign):' /proc/self/status"});
  sigaction(SIGUSR1, &old_usr1, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
  std::istringstream lines(result.stdout_text);
  std::string pid, group, blocked, ignored;
  std::getline(lines, pid);
  std::getline(lines, group);
  std::getline(lines, blocked);
  std::getline(lines, ignored);
  EXPECT_EQ(group, pid) << "the script is not the leader of its own process group";
  // Read by grep exec'd in the spawned shell's place: dash blocks every signal of its own while
  // it waits for a child, so the shell's status read from a child of it shows them all blocked.
  // Signals 1..31 (bit n-1 for signal n); 32 and 33 are glibc's own, beyond its API.
  const auto standard = [](const std::string& line) {
    return std::stoull(line.substr(line.find('\t') + 1), nullptr, 16) & 0x7fffffffULL;
  };
  EXPECT_EQ(standard(blocked), 0u) << blocked;
  EXPECT_EQ(standard(ignored), 0u) << ignored;
}

}  // namespace spawn_state
