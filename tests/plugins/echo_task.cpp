// task/echo: records its options back as metrics and can fail on purpose, so
// host tests cover records, OOM and error handling without any real work.
#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "runner/task.hpp"

namespace {

class Echo : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::string fail = p.text("fail");
    if (fail == "oom") TORCH_CHECK_WITH(OutOfMemoryError, false, "echo: pretend CUDA out of memory");
    if (fail == "error") throw std::runtime_error("echo: asked to fail");
    if (fail == "crash") std::abort();
    if (fail == "skip") throw runner::SkipPoint("echo: this configuration is not supported");
    // What the host sees after a sticky CUDA error (simulated: CPU runs have none).
    if (fail == "device_fault") throw runner::DeviceFault("echo: pretend illegal memory access");
    // A task that finished but measured nothing usable: no record, or a NaN metric.
    if (fail == "no_records") return;
    // RUNNER_ECHO_EXTRA_SLEEP_US slows every step without changing the point's
    // parameters: a stand-in for code that got slower (history tests).
    const char* extra = std::getenv("RUNNER_ECHO_EXTRA_SLEEP_US");
    const std::int64_t sleep_us = p.integer("sleep_us") + (extra ? std::atoll(extra) : 0);
    const auto times = runner::measure_steps(ctx, [&](runner::StepTimer& t) {
      t.phase("sleep", [&] { std::this_thread::sleep_for(std::chrono::microseconds(sleep_us)); });
    });
    for (const auto& label : p.texts("labels")) {
      runner::Record r;
      r.label("item", label);
      r.add("value", fail == "nan" ? std::nan("") : p.number("value"), "units");
      // missing_metric: a record without sleep_ms, which the manifest requires.
      if (fail != "missing_metric") r.add("sleep_ms", runner::Stats::of(times.ms.at("sleep")), "ms");
      r.add_text("word", p.text("word"));
      if (fail == "duplicate_metric") r.add("value", 0.0, "units");
      out.emit(std::move(r));
    }
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "echo";
  m.version = "0";
  m.description = "test task: echoes options as metrics, fails on request";
  m.options = {
      runner::opt_float("value", 1.0, "recorded as metric 'value'"),
      runner::opt_int("sleep_us", 0, "time spent per step").in_range(0, 1e7),
      runner::opt_string("word", "hello", "recorded as text metric 'word'"),
      runner::opt_enum("fail", {"none", "oom", "error", "crash", "skip", "device_fault", "duplicate_metric", "nan", "no_records", "missing_metric"}, "none", "how to fail"),
      runner::opt_list("labels", runner::OptionType::StringList, runner::Value::List{runner::Value("a")},
                       "one record per label"),
      runner::opt_plugin("optimizer", runner::PluginKind::Optimizer, "sgd", "a nested plugin, for validation tests"),
  };
  // Every point records all three (fail: missing_metric leaves sleep_ms out on purpose).
  m.metrics = std::vector<std::string>{"value", "sleep_ms", "word"};
  m.labels = std::vector<std::string>{"item"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<Echo>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
