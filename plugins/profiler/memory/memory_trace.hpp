// Allocator-trace analysis, independent of CUDA so it is tested on any machine:
// the active-memory timeline, the largest allocations grouped by where they were
// made, and the phase bands of the chart. The profiler converts the caching
// allocator's TraceEntry list into TraceEvents and hands them here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plugins::memory_profiler {

struct TraceEvent {
  enum class Kind { alloc, free, other };
  Kind kind = Kind::other;
  std::int64_t bytes = 0;
  double time_ms = 0;  // milliseconds since the first event
  std::string where;   // runner range path when the event happened ("" = outside ranges)
};

struct Timeline {
  std::vector<double> time_ms;
  std::vector<double> active_bytes;  // after each alloc/free event
  std::vector<std::size_t> event_index;  // the TraceEvent each point came from
  double peak_bytes = 0;
  std::string peak_where;  // range path of the allocation that reached the peak
};

// Active bytes after every alloc (+bytes) and free (-bytes). The trace may start
// with memory already live or have lost its oldest entries (a ring buffer), so the
// level is anchored at the end: `active_bytes_at_end` is what the allocator holds
// once the trace ends, and the start level is that minus the sum of all changes.
Timeline active_memory(const std::vector<TraceEvent>& events, std::int64_t active_bytes_at_end);

// "measure/step_3/forward/layer12" -> "measure/step_*/forward/layer*": trailing
// digits of each path component become '*', so repeats of one site group together.
std::string generalize_numbers(const std::string& path);

struct AllocationGroup {
  std::int64_t bytes = 0;  // size of each allocation in the group
  std::string where;       // range path (generalized when grouping numbered ranges)
  std::int64_t count = 0;  // allocations of this size at this place
  double first_time_ms = 0;
};

// Allocations grouped by (size, place), largest size first (ties: more frequent
// first, then by place); at most top_k groups.
std::vector<AllocationGroup> largest_allocations(const std::vector<TraceEvent>& events, std::size_t top_k,
                                                 bool group_numbered_ranges);

struct PhaseSpan {
  double begin_ms = 0, end_ms = 0;
  std::string label;  // the last component of the phase path, e.g. "forward"
};

// The host wraps each repetition of a point's steps in a `repetition_<i>` range, so
// paths read "repetition_0/measure/step_0/forward". Phase bands and `plot_from` are
// about what lies under it: this drops that leading component (other paths unchanged).
std::string without_repetition(const std::string& path);

// Runs of consecutive events whose range path (without_repetition), cut to `depth`
// components, is the same and has exactly `depth` components
// ("measure/step_0/forward" at depth 3). A span ends where the next different run begins.
std::vector<PhaseSpan> phase_spans(const std::vector<TraceEvent>& events, int depth);

// The caching allocator tags an event with the user metadata of the thread that
// made it, and the runner sets that metadata on the main thread only. Backward
// runs on autograd's device thread, so its allocations arrive untagged. The
// profiler logs when the main thread entered each range path; an untagged event
// takes the path that was current at its time.
struct RangeMark {
  double time_us = 0;  // microseconds since the epoch (the trace's clock after snapshot())
  std::string path;    // range path from this time on ("" = outside ranges)
};
// The path current at `time_us` (marks sorted by time; "" before the first).
std::string range_at(const std::vector<RangeMark>& marks, double time_us);

// One allocator trace entry as a TraceEvent: `time_us` and `first_time_us` are the
// trace's microseconds since the epoch; an untagged entry takes its path from `marks`.
TraceEvent make_event(TraceEvent::Kind kind, std::int64_t bytes, double time_us, double first_time_us,
                      const std::string& tag, const std::vector<RangeMark>& marks);

// "a,b" -> "\"a,b\"" (RFC 4180 quoting when needed)
std::string csv_field(const std::string& text);

}  // namespace plugins::memory_profiler
