#include <gtest/gtest.h>

#include "memory_trace.hpp"

namespace plugins::memory_profiler {
namespace {

using Kind = TraceEvent::Kind;

TraceEvent alloc(std::int64_t bytes, double ms, const std::string& where) { return {Kind::alloc, bytes, ms, where}; }
TraceEvent free_of(std::int64_t bytes, double ms, const std::string& where) { return {Kind::free, bytes, ms, where}; }

TEST(ActiveMemory, StartsFromTheEndLevelMinusAllChanges) {
  // 1000 bytes were live before the trace began and are still live at its end.
  const std::vector<TraceEvent> events = {alloc(100, 0, "a"), alloc(50, 1, "b"), {Kind::other, 7, 1.5, "b"},
                                          free_of(100, 2, "c")};
  const Timeline t = active_memory(events, 1050);
  EXPECT_EQ(t.active_bytes, (std::vector<double>{1100, 1150, 1050}));
  EXPECT_EQ(t.time_ms, (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(t.event_index, (std::vector<std::size_t>{0, 1, 3}));
  EXPECT_EQ(t.peak_bytes, 1150);
  EXPECT_EQ(t.peak_where, "b");
}

TEST(ActiveMemory, TruncatedTraceWithOrphanFreesStaysNonNegative) {
  // The ring buffer lost the alloc of these 200 bytes; the free is still there.
  const Timeline t = active_memory({free_of(200, 0, "x"), alloc(10, 1, "y")}, 10);
  EXPECT_EQ(t.active_bytes, (std::vector<double>{0, 10}));
}

TEST(GeneralizeNumbers, ReplacesTrailingDigitsOfEachComponent) {
  EXPECT_EQ(generalize_numbers("measure/step_3/forward/layer12/attention"), "measure/step_*/forward/layer*/attention");
  EXPECT_EQ(generalize_numbers("42/x"), "42/x");
  EXPECT_EQ(generalize_numbers(""), "");
}

TEST(LargestAllocations, GroupsRepeatsAcrossStepsAndLayersLargestFirst) {
  const std::vector<TraceEvent> events = {
      alloc(400, 0, "measure/step_0/forward/layer0"), alloc(400, 1, "measure/step_1/forward/layer1"),
      alloc(900, 2, "measure/step_0/backward"),       alloc(400, 3, "init"),
      alloc(5, 4, "measure/step_0/optimizer"),        free_of(900, 5, "measure/step_0/backward")};
  const auto top = largest_allocations(events, 3, true);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].bytes, 900);
  EXPECT_EQ(top[0].where, "measure/step_*/backward");
  EXPECT_EQ(top[1].bytes, 400);
  EXPECT_EQ(top[1].where, "measure/step_*/forward/layer*");
  EXPECT_EQ(top[1].count, 2);
  EXPECT_EQ(top[1].first_time_ms, 0);
  EXPECT_EQ(top[2].where, "init");
}

TEST(LargestAllocations, KeepsExactPathsWhenNotGrouping) {
  const auto top = largest_allocations({alloc(8, 0, "step_1"), alloc(8, 1, "step_2")}, 10, false);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].count, 1);
}

TEST(PhaseSpans, FollowRunsOfOnePhasePathAndEndWhereTheNextBegins) {
  const std::vector<TraceEvent> events = {
      alloc(1, 0, ""),                              // outside: no band
      alloc(1, 1, "measure/step_0/forward"),        //
      alloc(1, 2, "measure/step_0/forward/layer0"), // same phase, deeper
      alloc(1, 3, "measure/step_0/backward"),       //
      alloc(1, 4, "measure/step_1/forward"),        // next step: a new band
      alloc(1, 6, "measure"),                       // too shallow: closes the band
  };
  const auto spans = phase_spans(events, 3);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].label, "forward");
  EXPECT_EQ(spans[0].begin_ms, 1);
  EXPECT_EQ(spans[0].end_ms, 3);
  EXPECT_EQ(spans[1].label, "backward");
  EXPECT_EQ(spans[1].end_ms, 4);
  EXPECT_EQ(spans[2].begin_ms, 4);
  EXPECT_EQ(spans[2].end_ms, 6);
}

// The host's repetition_<i> range sat above measure/step_i and shifted every depth by
// one: the H100 figures showed step bands instead of forward/backward/optimizer.
TEST(PhaseSpans, LookBelowTheHostsRepetitionRange) {
  EXPECT_EQ(without_repetition("repetition_0/measure/step_0/forward"), "measure/step_0/forward");
  EXPECT_EQ(without_repetition("repetition_12/warmup"), "warmup");
  EXPECT_EQ(without_repetition("repetition_3"), "");
  EXPECT_EQ(without_repetition("repetition_x/measure"), "repetition_x/measure");
  EXPECT_EQ(without_repetition("measure/repetition_0"), "measure/repetition_0");
  const std::vector<TraceEvent> events = {
      alloc(1, 1, "repetition_0/measure/step_0/forward/layer0"),
      alloc(1, 2, "repetition_0/measure/step_0/backward"),
      alloc(1, 3, "repetition_0/measure/step_0/optimizer"),
      alloc(1, 4, "repetition_0"),
  };
  const auto spans = phase_spans(events, 3);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].label, "forward");
  EXPECT_EQ(spans[1].label, "backward");
  EXPECT_EQ(spans[2].label, "optimizer");
  EXPECT_EQ(spans[2].end_ms, 4);
}

TEST(CsvField, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_field("a/b"), "a/b");
  EXPECT_EQ(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
}

}  // namespace
}  // namespace plugins::memory_profiler

namespace plugins::memory_profiler {
namespace {

// A 2.7B train step takes ~600 ms; its trace spans ~6e5 microseconds.
TEST(MakeEvent, TraceMicrosecondsBecomeMilliseconds) {
  const double t0 = 1795392768220730.0;
  const TraceEvent e = make_event(TraceEvent::Kind::alloc, 8, t0 + 600000.0, t0, "measure/step_0/forward", {});
  EXPECT_DOUBLE_EQ(e.time_ms, 600.0);
  EXPECT_EQ(e.where, "measure/step_0/forward");
}

// Backward allocates on autograd's thread, which carries no tag: the main thread's
// range at that time names it, so no allocation of the step falls between bands.
TEST(MakeEvent, UntaggedEventTakesTheRangeCurrentAtItsTime) {
  const std::vector<RangeMark> marks = {{100, ""}, {200, "measure/step_0/forward"}, {300, "measure/step_0/backward"},
                                        {500, "measure/step_0"}};
  EXPECT_EQ(make_event(TraceEvent::Kind::alloc, 1, 350, 100, "", marks).where, "measure/step_0/backward");
  EXPECT_EQ(make_event(TraceEvent::Kind::alloc, 1, 50, 0, "", marks).where, "");
  EXPECT_EQ(make_event(TraceEvent::Kind::alloc, 1, 300, 100, "", marks).where, "measure/step_0/backward");
  EXPECT_EQ(make_event(TraceEvent::Kind::alloc, 1, 350, 100, "warmup/x", marks).where, "warmup/x");
  EXPECT_EQ(range_at(marks, 600), "measure/step_0");
}

}  // namespace
}  // namespace plugins::memory_profiler
