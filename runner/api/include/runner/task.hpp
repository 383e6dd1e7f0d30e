// A task is what one experiment point does: build its state from resolved
// options, measure (through measure_steps), and emit records. Sweeps are the
// host's business; a task never loops over parameter values itself.
#pragma once
#include "runner/context.hpp"
#include "runner/measure.hpp"
#include "runner/outcome.hpp"
#include "runner/params.hpp"
#include "runner/plugin.hpp"
#include "runner/record.hpp"

namespace runner {

class Task : public PluginBase {
 public:
  ~Task() override;
  // Throwing c10::OutOfMemoryError makes the point `oom`, runner::SkipPoint `skipped`
  // (with its reason), runner::DeviceFault ends the sweep; any other exception `error`.
  virtual void run(Context& ctx, const Params& params, Recorder& out) = 0;
};

}  // namespace runner
