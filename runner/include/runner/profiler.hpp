// A profiler brackets each point: it starts before the task, sees every named
// range (runner::ScopedRange), and adds metrics and artifacts to the point's records.
#pragma once
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
  void range_push(const std::string&) override {}
  void range_pop(const std::string&) override {}
};

}  // namespace runner
