// A profiler brackets each point: it starts before the task, sees every named
// range (runner::ScopedRange, from any thread), adds metrics and artifacts to the
// point's records, and may add records of its own (e.g. one per kernel).
#pragma once
#include <vector>

#include "runner/context.hpp"
#include "runner/range.hpp"
#include "runner/record.hpp"

namespace runner {

class Profiler : public PluginBase, public RangeListener {
 public:
  ~Profiler() override;
  virtual void point_begin(Context& ctx) = 0;
  // Called once after the task returns (or failed); may add to `summary`,
  // which the host merges into every record of the point.
  virtual void point_end(Context& ctx, Record& summary) = 0;
  // Called after point_end when the task succeeded, with the task's records (the
  // summary merged in): records of the profiler's own, which the host appends
  // after the task's, labelled profiler=<plugin name>, without the summary.
  virtual void emit_records(Context& /*ctx*/, const std::vector<Record>& /*task_records*/, Recorder& /*out*/) {}
  void range_push(const std::string&) override {}
  void range_pop(const std::string&) override {}
};

}  // namespace runner
