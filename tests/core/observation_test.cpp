// What the host stores about how a point was measured and what the GPU did,
// fed with made-up summaries and NVML samples (no GPU needed).
#include <gtest/gtest.h>

#include "runner/gpu_state.hpp"
#include "run/observation.hpp"

namespace runner {
namespace {

MeasureSummary adaptive_summary(bool met) {
  MeasureSummary s;
  s.mode = "adaptive";
  s.cache = "warm";
  s.n = 300;
  s.rel_stderr = met ? 0.008 : 0.031;
  s.target_rel_stderr = 0.01;
  s.target_met = met;
  s.stop_reason = met ? "target" : "max_steps";
  return s;
}

MeasureSettings adaptive_settings() {
  MeasureSettings m;
  m.target_rel_stderr = 0.01;
  m.min_steps = 10;
  m.max_steps = 300;
  m.max_seconds = 60;
  return m;
}

// The case: two slow steps used up max_seconds; the noise was already
// below the target, but min_steps was never reached. The warning says so.
TEST(Observation, AWarningNamesMinStepsWhenMaxSecondsRanOutBeforeIt) {
  MeasureSummary s = adaptive_summary(false);
  s.n = 2;
  s.rel_stderr = 0.0027;
  s.target_rel_stderr = 0.005;
  s.stop_reason = "max_seconds";
  const Observation o = observe_point({s}, adaptive_settings(), GpuSample{}, GpuSample{});
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0], "max_seconds (60 s) ran out after 2 steps, before min_steps (10), so the noise target 0.5% "
                           "was never checked (relative standard error 0.27%); raise measure.max_seconds or lower "
                           "measure.min_steps");
  s.n = 40;
  s.rel_stderr = 0.02;
  EXPECT_EQ(observe_point({s}, adaptive_settings(), GpuSample{}, GpuSample{}).warnings.at(0),
            "relative standard error 2% is above the target 0.5% after 40 steps: max_seconds (60 s) ran out; raise "
            "measure.max_seconds or the target");
}

GpuSample sample(unsigned sm_mhz, std::uint64_t reasons) {
  GpuSample g;
  g.valid = true;
  g.sm_clock_mhz = sm_mhz;
  g.memory_clock_mhz = 2619;
  g.temperature_c = 60;
  g.power_w = 500;
  g.throttle_reasons = reasons;
  return g;
}

TEST(Observation, MeasurementSummaryIsStoredAndAMissedTargetWarns) {
  const Observation o = observe_point({adaptive_summary(false)}, adaptive_settings(), GpuSample{}, GpuSample{});
  ASSERT_TRUE(o.fields.contains("measurement"));
  EXPECT_EQ(o.fields["measurement"]["n"], 300);
  EXPECT_EQ(o.fields["measurement"]["target_met"], false);
  EXPECT_EQ(o.fields["measurement"]["stop_reason"], "max_steps");
  EXPECT_FALSE(o.fields.contains("gpu"));  // no NVML: nothing invented
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0], "relative standard error 3.1% is above the target 1% after 300 steps: max_steps (300) "
                           "reached; raise measure.max_steps or the target");
  EXPECT_TRUE(observe_point({adaptive_summary(true)}, adaptive_settings(), GpuSample{}, GpuSample{}).warnings.empty());
}

TEST(Observation, ThrottlingDuringTheLoopIsRecordedAndWarned) {
  MeasureSummary s = adaptive_summary(true);
  s.gpu_samples = 4;
  s.min_sm_clock_mhz = 1410;
  s.max_sm_clock_mhz = 1980;
  s.throttle_reasons = 0x4 | 0x1;  // sw power cap (a slowdown) and idle (not one)
  const Observation o = observe_point({s}, adaptive_settings(), sample(1980, 0x1), sample(1755, 0));
  ASSERT_TRUE(o.fields.contains("gpu"));
  EXPECT_EQ(o.fields["gpu"]["throttled"], true);
  EXPECT_EQ(o.fields["gpu"]["throttle_reasons"], nlohmann::json::array({"sw_power_cap"}));
  EXPECT_EQ(o.fields["gpu"]["before"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(o.fields["gpu"]["after"]["throttle_reasons"], nlohmann::json::array());
  EXPECT_EQ(o.fields["gpu"]["during"]["min_sm_clock_mhz"], 1410);
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_NE(o.warnings[0].find("throttled during the point (sw_power_cap; SM clock 1410-1980 MHz)"), std::string::npos)
      << o.warnings[0];
}

TEST(Observation, IdleAndApplicationClockReasonsAreNotThrottling) {
  const Observation o = observe_point({}, adaptive_settings(), sample(1980, 0x1 | 0x2), sample(1980, 0x1));
  EXPECT_EQ(o.fields["gpu"]["throttled"], false);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_FALSE(o.fields.contains("measurement"));
}

TEST(Observation, ReasonNamesCoverEveryKnownBit) {
  EXPECT_EQ(throttle_reason_names(0x4 | 0x40 | 0x80 | 0x1000),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown", "other"}));
  EXPECT_TRUE(throttle_reason_names(0).empty());
}

}  // namespace
}  // namespace runner
