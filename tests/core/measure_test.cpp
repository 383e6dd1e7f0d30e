// The measurement model on CPU: what a step is, fixed and adaptive stopping,
// repetitions, cold mode and rate counters. Bounds, not speeds: steps sleep, so
// a loaded machine only makes them noisier, and every assertion allows for that.
// The hold_stream tests at the end need a CUDA device and skip without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "run/observation.hpp"
#include "run/point_record.hpp"
#include "runner/context.hpp"
#include "runner/measure.hpp"
#include "config/sweep.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

void sleep_ms(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

Context cpu_context(MeasureSettings m) {
  Context ctx;
  ctx.measure = m;
  return ctx;
}

MeasureSettings fixed(int steps) {
  MeasureSettings m;
  m.warmup_steps = 1;
  m.measured_steps = steps;
  return m;
}

MeasureSettings adaptive(double target, int min_steps, int max_steps, double max_seconds) {
  MeasureSettings m;
  m.warmup_steps = 1;
  m.target_rel_stderr = target;
  m.min_steps = min_steps;
  m.max_steps = max_steps;
  m.max_seconds = max_seconds;
  return m;
}

TEST(Measure, StepSpansFirstPhaseStartToLastPhaseEndIncludingGaps) {
  Context ctx = cpu_context(fixed(3));
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) {
    timer.phase("a", [] { sleep_ms(2); });
    sleep_ms(3);  // between phases: part of the step, of no phase
    timer.phase("b", [] { sleep_ms(2); });
  });
  ASSERT_EQ(t.order, (std::vector<std::string>{"a", "b", "step", "wall"}));
  for (size_t i = 0; i < 3; ++i) {
    const double a = t.ms.at("a")[i], b = t.ms.at("b")[i], step = t.ms.at("step")[i];
    EXPECT_GE(step, a + b + 2.5) << "the gap between phases belongs to the step";
    EXPECT_GE(step, 6.5);
    EXPECT_GE(t.ms.at("wall")[i], step);
  }
}

TEST(Measure, FixedModeMeasuresExactlyMeasuredSteps) {
  Context ctx = cpu_context(fixed(7));
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] {}); });
  EXPECT_EQ(t.ms.at("step").size(), 7u);
  EXPECT_EQ(t.summary.mode, "fixed");
  EXPECT_EQ(t.summary.stop_reason, "fixed");
  EXPECT_EQ(t.summary.n, 7);
  ASSERT_EQ(ctx.measurements.size(), 1u);
  EXPECT_EQ(ctx.measurements[0].n, 7);
}

TEST(Measure, WarmupSecondsExtendsTheWarmupPastItsStepCount) {
  MeasureSettings m = fixed(2);
  m.warmup_steps = 1;
  m.warmup_seconds = 0.05;
  Context ctx = cpu_context(m);
  int steps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) { timer.phase("x", [&] { ++steps; sleep_ms(1); }); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(seconds, 0.05);
  EXPECT_GT(t.summary.warmup_steps, 1) << "one warm-up step of 1 ms cannot fill 50 ms";
  EXPECT_LE(t.summary.warmup_steps, 51) << "each step sleeps at least 1 ms";
  EXPECT_EQ(steps, t.summary.warmup_steps + 2);
  EXPECT_EQ(t.ms.at("step").size(), 2u);

  // Without it, exactly warmup_steps.
  Context plain = cpu_context(fixed(2));
  EXPECT_EQ(measure_steps(plain, [](StepTimer& timer) { timer.phase("x", [] {}); }).summary.warmup_steps, 1);
}

TEST(Measure, WithoutSyncEachStepFixedModeStillTimesEveryStep) {
  MeasureSettings m = fixed(5);
  m.sync_each_step = false;
  Context ctx = cpu_context(m);
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] { sleep_ms(1); }); });
  EXPECT_EQ(t.ms.at("x").size(), 5u);
  EXPECT_EQ(t.ms.count("wall"), 0u);
  EXPECT_EQ(t.order, (std::vector<std::string>{"x", "step"}));
}

// A synthetic task with known noise: 2 ms +- 20% (uniform), seeded.
TEST(Measure, AdaptiveStopsWithinBoundsAndMeetsTheTargetWhenItSaysSo) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  Context ctx = cpu_context(adaptive(0.02, 5, 400, 30));
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) { timer.phase("x", [&] { sleep_ms(2 * jitter(rng)); }); });
  const MeasureSummary& s = t.summary;
  EXPECT_EQ(s.mode, "adaptive");
  EXPECT_GE(s.n, 5);
  EXPECT_LE(s.n, 400);
  EXPECT_EQ(static_cast<size_t>(s.n), t.ms.at("step").size());
  EXPECT_NEAR(s.rel_stderr, rel_stderr(t.ms.at("step")), 1e-12);
  if (s.target_met) {
    EXPECT_EQ(s.stop_reason, "target");
    EXPECT_LE(s.rel_stderr, 0.02);
  } else {
    EXPECT_TRUE(s.stop_reason == "max_steps" || s.stop_reason == "max_seconds") << s.stop_reason;
  }
}

TEST(Measure, AdaptiveStopsAtMinStepsWhenTheTargetIsLoose) {
  Context ctx = cpu_context(adaptive(0.9, 4, 100, 30));
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] { sleep_ms(1); }); });
  EXPECT_EQ(t.summary.n, 4);
  EXPECT_TRUE(t.summary.target_met);
  EXPECT_EQ(t.summary.stop_reason, "target");
}

TEST(Measure, AdaptiveStopsAtMaxStepsWhenTheTargetIsOutOfReach) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  Context ctx = cpu_context(adaptive(1e-9, 3, 12, 30));
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) { timer.phase("x", [&] { sleep_ms(jitter(rng)); }); });
  EXPECT_EQ(t.summary.n, 12);
  EXPECT_FALSE(t.summary.target_met);
  EXPECT_EQ(t.summary.stop_reason, "max_steps");
}

TEST(Measure, AdaptiveStopsAtMaxSeconds) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  Context ctx = cpu_context(adaptive(1e-9, 2, 100000, 0.1));
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) { timer.phase("x", [&] { sleep_ms(10 * jitter(rng)); }); });
  EXPECT_EQ(t.summary.stop_reason, "max_seconds");
  // Steps sleep 5-15 ms (seeded jitter around 10 ms), so at most 20 fit in 0.1 s; a
  // bound at the mean (11) failed when the jitter drew several short steps.
  EXPECT_LE(t.summary.n, 20);
  EXPECT_GE(t.summary.measured_seconds, 0.1);
}

TEST(Measure, MaxSecondsStillLeavesTwoStepsForANoiseEstimate) {
  Context ctx = cpu_context(adaptive(1e-9, 2, 100, 0.001));
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] { sleep_ms(5); }); });
  EXPECT_EQ(t.summary.n, 2);
  EXPECT_EQ(t.summary.stop_reason, "max_seconds");
}

TEST(Measure, AdaptiveWithoutSyncEachStepChecksInBatchesOfMinSteps) {
  MeasureSettings m = adaptive(0.9, 6, 100, 30);
  m.sync_each_step = false;
  Context ctx = cpu_context(m);
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] { sleep_ms(1); }); });
  EXPECT_EQ(t.summary.n, 6);
}

TEST(Measure, RepetitionsRunFreshWarmUpsAndRecordOneMeanEach) {
  MeasureSettings m = fixed(4);
  m.warmup_steps = 2;
  m.repetitions = 3;
  Context ctx = cpu_context(m);
  int calls = 0;
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) {
    ++calls;
    timer.phase("x", [] { sleep_ms(1); });
  });
  EXPECT_EQ(calls, 3 * (2 + 4));
  EXPECT_EQ(t.ms.at("step").size(), 12u);
  EXPECT_EQ(t.repetition_steps, (std::vector<std::int64_t>{4, 4, 4}));
  const Stats s = t.stats("step");
  ASSERT_EQ(s.repetition_means.size(), 3u);
  const std::vector<double>& step = t.ms.at("step");
  EXPECT_DOUBLE_EQ(s.repetition_means[1], (step[4] + step[5] + step[6] + step[7]) / 4);
  EXPECT_EQ(t.summary.repetitions, 3);
}

TEST(Measure, ColdModeFlushesOutsideTheTimedStep) {
  MeasureSettings m = fixed(3);
  m.cache = "cold";
  Context ctx = cpu_context(m);
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] {}); });
  EXPECT_EQ(t.summary.cache, "cold");
  for (double ms : t.ms.at("step")) EXPECT_LT(ms, 5.0);  // the flush is not in the step
}

TEST(Measure, RatesComeFromDeclaredWorkPerStep) {
  Context ctx = cpu_context(fixed(3));
  const PhaseTimes t = measure_steps(ctx, [](StepTimer& timer) { timer.phase("x", [] { sleep_ms(2); }); });
  Record r;
  StepWork work;
  work.items = 1000;
  work.item_name = "tokens";
  work.flop = 4e9;
  work.bytes = 2e6;
  t.record(r, work);
  for (const char* name : {"x_ms", "step_ms", "wall_ms", "tokens_per_s", "tflops", "gbps"})
    ASSERT_NE(r.find(name), nullptr) << name;
  EXPECT_EQ(r.find("tokens_per_s")->unit, "tokens/s");
  EXPECT_EQ(r.find("tflops")->unit, "TFLOP/s");
  const Stats& tokens = std::get<Stats>(r.find("tokens_per_s")->value);
  const std::vector<double>& step = t.ms.at("step");
  EXPECT_DOUBLE_EQ(tokens.max, 1000 / (*std::min_element(step.begin(), step.end()) * 1e-3));
  const Stats& tflops = std::get<Stats>(r.find("tflops")->value);
  EXPECT_DOUBLE_EQ(tflops.min, 4e9 / (*std::max_element(step.begin(), step.end()) * 1e-3) / 1e12);
}

TEST(Measure, InvalidSettingsThrowBeforeRunningAnything) {
  MeasureSettings m = adaptive(0.01, 1, 10, 1);
  Context ctx = cpu_context(m);
  int calls = 0;
  EXPECT_THROW(measure_steps(ctx, [&](StepTimer&) { ++calls; }), std::runtime_error);
  EXPECT_EQ(calls, 0);
}

TEST(Measure, HoldStreamWithSyncEachStepIsRefusedBeforeRunningAnything) {
  MeasureSettings m = fixed(3);
  m.hold_stream = true;  // sync_each_step is true by default
  Context ctx = cpu_context(m);
  int calls = 0;
  try {
    measure_steps(ctx, [&](StepTimer&) { ++calls; });
    ADD_FAILURE() << "hold_stream with sync_each_step was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("measure.hold_stream needs sync_each_step: false: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(calls, 0);
}

// On CPU there is no stream to hold: the steps are measured as without it, and the
// summary's hold_stream is false (what was asked is in the point's params).
TEST(Measure, HoldStreamOnCpuMeasuresAsWithoutItAndSaysNothingWasHeld) {
  MeasureSettings m = fixed(40);
  m.sync_each_step = false;
  m.hold_stream = true;
  Context ctx = cpu_context(m);
  int steps = 0;
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) { timer.phase("x", [&] { ++steps; }); });
  EXPECT_EQ(t.summary.n, 40);
  EXPECT_EQ(steps, 1 + 40);
  EXPECT_FALSE(t.summary.hold_stream);
  EXPECT_EQ(t.summary.hold_released_by_watchdog, 0);
}

TEST(Measure, HoldStreamIsParsedAndRefusedWithSyncEachStepAtItsLine) {
  const auto dir = testing::fresh_dir("hold_stream");
  auto points_of = [&](const std::string& measure) {
    const auto file = testing::write_file(dir / "e.yaml", "experiment: e\ntask: echo\nmeasure: " + measure + "\n");
    return expand_points(load_experiment(file, {}, false), testing::test_registry());
  };
  const std::vector<Point> held = points_of("{sync_each_step: false, hold_stream: true}");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].measure.hold_stream);
  EXPECT_EQ(point_params_json(held[0], c10::Device(c10::kCPU)).value("measure.hold_stream", false), true);
  const std::vector<Point> plain = points_of("{sync_each_step: false}");
  EXPECT_FALSE(plain[0].measure.hold_stream);
  EXPECT_FALSE(point_params_json(plain[0], c10::Device(c10::kCPU)).contains("measure.hold_stream"))
      << "older records' params stay as they were";
  try {
    points_of("{hold_stream: true}");
    ADD_FAILURE() << "hold_stream with the default sync_each_step: true was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("e.yaml:3:10: measure: hold_stream needs sync_each_step: false: "),
              std::string::npos)
        << e.what();
  }
}

TEST(Measure, HoldStreamIsRecordedWhereAskedAndAWatchdogReleaseWarns) {
  MeasureSummary s;
  s.mode = "fixed";
  s.n = 100;
  MeasureSettings asked;
  asked.sync_each_step = false;
  asked.hold_stream = true;
  // Asked on CPU: recorded as not held, no warning.
  const Observation cpu = observe_point({s}, asked, GpuSample{}, GpuSample{});
  EXPECT_EQ(cpu.fields.at("measurement").at("hold_stream"), false);
  EXPECT_EQ(cpu.fields.at("measurement").at("hold_released_by_watchdog"), 0);
  EXPECT_TRUE(cpu.warnings.empty());
  // Not asked: neither key.
  EXPECT_FALSE(observe_point({s}, MeasureSettings{}, GpuSample{}, GpuSample{}).fields.at("measurement").contains("hold_stream"));
  // Held, and the watchdog had to release twice: the warning says what that did and what to change.
  s.hold_stream = true;
  s.hold_released_by_watchdog = 2;
  const Observation held = observe_point({s}, asked, GpuSample{}, GpuSample{});
  EXPECT_EQ(held.fields.at("measurement").at("hold_stream"), true);
  EXPECT_EQ(held.fields.at("measurement").at("hold_released_by_watchdog"), 2);
  ASSERT_EQ(held.warnings.size(), 1u);
  EXPECT_EQ(held.warnings[0],
            "measure.hold_stream: the watchdog released the held stream 2 times after 250 ms without a step enqueued, "
            "so those batches' step times include host gaps; a step must not synchronize the host (.item(), a "
            "synchronize), or lower measure.measured_steps / measure.min_steps so a held batch's launches fit the "
            "stream's queue");
}

// The GPU tests below need a CUDA build and a device.
bool cuda_device_here() {
#ifdef RUNNER_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

Context cuda_context(MeasureSettings m) {
  Context ctx = cpu_context(m);
  ctx.device = c10::Device(c10::kCUDA, 0);
  return ctx;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The case hold_stream is for: a step of 20 tiny launches, each shorter on the GPU
// than on the host. Unheld, the GPU waits for every launch and the host's launch
// time lands between the step's events; held, the launches run back to back. 70
// steps: two held batches of 32 and one of 6.
TEST(MeasureCuda, HoldStreamTakesTheHostsLaunchGapsOutOfAShortStep) {
  if (!cuda_device_here()) GTEST_SKIP() << "no CUDA device";
  constexpr int kLaunches = 20, kSteps = 70;
  auto run = [&](bool hold) {
    MeasureSettings m = fixed(kSteps);
    m.warmup_steps = 5;
    m.warmup_seconds = 0.05;
    m.sync_each_step = false;
    m.hold_stream = hold;
    Context ctx = cuda_context(m);
    const at::Tensor x = at::ones({1024}, at::TensorOptions().device(ctx.device));
    at::Tensor y = at::zeros({1024}, at::TensorOptions().device(ctx.device));
    const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) {
      timer.phase("adds", [&] {
        for (int i = 0; i < kLaunches; ++i) y.add_(x);
      });
    });
    // Every step's adds ran, held or not.
    const double steps_run = t.summary.warmup_steps + kSteps;
    EXPECT_EQ(y[0].item<float>(), static_cast<float>(kLaunches * steps_run));
    EXPECT_EQ(t.summary.hold_stream, hold);
    EXPECT_EQ(t.summary.hold_released_by_watchdog, 0);
    EXPECT_EQ(t.summary.n, kSteps);
    return median_of(t.ms.at("step"));
  };
  // Held first: should the clocks still be ramping up, that favours the unheld run.
  const double held = run(true);
  const double unheld = run(false);
  std::printf("median step of %d launches: held %.4f ms, unheld %.4f ms\n", kLaunches, held, unheld);
  EXPECT_LE(held, unheld);
}

// A step that makes the host wait for the stream (.item()) while the stream waits
// for the host: the watchdog releases the hold, the loop finishes, and it is counted.
TEST(MeasureCuda, HoldStreamWatchdogReleasesAStepThatSynchronizes) {
  if (!cuda_device_here()) GTEST_SKIP() << "no CUDA device";
  MeasureSettings m = fixed(4);
  m.sync_each_step = false;
  m.hold_stream = true;
  Context ctx = cuda_context(m);
  const at::Tensor x = at::ones({1024}, at::TensorOptions().device(ctx.device));
  float total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const PhaseTimes t = measure_steps(ctx, [&](StepTimer& timer) {
    timer.phase("sum", [&] { total += x.sum().item<float>(); });
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(t.summary.hold_stream);
  // One batch of 4: its first step blocks until the watchdog lets the stream go;
  // the other three run unheld.
  EXPECT_EQ(t.summary.hold_released_by_watchdog, 1);
  EXPECT_GE(seconds, 0.25);
  EXPECT_EQ(t.summary.n, 4);
  EXPECT_EQ(total, 1024.0f * (1 + 4));
}

TEST(Stats, RelStderrIsStdOverRootNOverMean) {
  const Stats s = Stats::of({1.0, 2.0, 3.0, 4.0});
  EXPECT_NEAR(s.rel_stderr(), s.std / 2.0 / 2.5, 1e-12);
  EXPECT_EQ(Stats::of({5.0}).rel_stderr(), 0.0);
}

}  // namespace
}  // namespace runner
