// The smallest useful task: records how long an empty step takes.
#include <memory>

#include "runner/task.hpp"

namespace {

class Hello : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const auto times = runner::measure_steps(ctx, [](runner::StepTimer& t) { t.phase("nothing", [] {}); });
    runner::Record r;
    r.label("greeting", p.text("greeting"));
    r.add("nothing_ms", runner::Stats::of(times.ms.at("nothing")), "ms");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "hello";
  m.version = "1";
  m.description = "example out-of-tree task: times an empty step";
  m.options = {runner::opt_string("greeting", "hello", "recorded as a label")};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<Hello>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
