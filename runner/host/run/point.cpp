#include "run/point.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <ATen/Context.h>
#include <ATen/Utils.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>

#include "runner/device.hpp"
#include "runner/gpu_state.hpp"
#include "runner/outcome.hpp"
#include "runner/profiler.hpp"
#include "runner/task.hpp"

namespace runner {
namespace {

// A point's profiler, with the host time spent in its point hooks (its cost
// outside the measured steps; what it costs inside them, it measures itself).
struct ActiveProfiler {
  std::string name;
  std::unique_ptr<Profiler> profiler;
  double hook_ms = 0;
};

// Adds the hook's duration to the profiler's cost, also when the hook throws.
template <typename Fn>
void timed_hook(ActiveProfiler& p, Fn&& fn) {
  struct Charge {
    ActiveProfiler& p;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Charge() { p.hook_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(); }
  } charge{p};
  fn();
}

// Runs the task inside its profilers; turns exceptions into statuses.
PointOutcome run_task(const Point& point, Context& ctx, std::vector<ActiveProfiler>& profilers) {
  PointOutcome outcome;
  try {
    at::manual_seed(ctx.dist.rank_seed(point.seed));
    // A point's "peak since the last reset" starts with the point, not with the peak the
    // previous point left behind (optimizer_state_sharding_accounting's after_init read 39.46
    // GiB, the unsharded point's peak, before this reset).
    reset_peak_memory(ctx.device);
    for (const Params& p : point.profilers)
      profilers.push_back({p.plugin_name(), ctx.create<Profiler>(PluginKind::Profiler, p)});
    for (auto& p : profilers) {
      add_range_listener(p.profiler.get());
      timed_hook(p, [&] { p.profiler->point_begin(ctx); });
    }
    RecordList recorder;
    {
      auto task = ctx.create<Task>(PluginKind::Task, point.params);
      task->run(ctx, point.params, recorder);
    }
    outcome.records = std::move(recorder.records);
  } catch (const SkipPoint& e) {
    outcome.status = RecordStatus::skipped;
    outcome.message = e.what();
  } catch (const DeviceFault& e) {
    outcome.status = RecordStatus::error;
    outcome.message = e.what();
    outcome.device_fault = true;
  } catch (const c10::OutOfMemoryError& e) {
    outcome.status = RecordStatus::oom;
    outcome.message = e.what_without_backtrace();
  } catch (const c10::Error& e) {
    outcome.status = RecordStatus::error;
    outcome.message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    outcome.status = RecordStatus::error;
    outcome.message = e.what();
  } catch (...) {
    outcome.status = RecordStatus::error;
    outcome.message = "threw something that is not a std::exception (an int, a plugin's own type); the plugin "
                      "should throw std::runtime_error with a message";
  }
  return outcome;
}

// Ends the profilers and returns what they add to every record of the point.
Record end_profilers(Context& ctx, std::vector<ActiveProfiler>& profilers) {
  Record summary;
  for (auto& p : profilers) {
    remove_range_listener(p.profiler.get());
    try {
      timed_hook(p, [&] { p.profiler->point_end(ctx, summary); });
    } catch (const std::exception& e) {
      ctx.log->warn("profiler " + p.name + " failed at point end: " + std::string(e.what()));
    } catch (...) {
      ctx.log->warn("profiler " + p.name + " failed at point end: threw something that is not a std::exception");
    }
  }
  return summary;
}

// The profilers' own records (after the task's, labelled profiler=<name>), and
// which profilers ran with their hook time, in every record of the point.
void add_profiler_records(Context& ctx, std::vector<ActiveProfiler>& profilers, PointOutcome& outcome) {
  if (outcome.status == RecordStatus::ok) {
    const std::vector<Record> task_records = outcome.records;
    for (auto& p : profilers) {
      RecordList own;
      try {
        timed_hook(p, [&] { p.profiler->emit_records(ctx, task_records, own); });
      } catch (const std::exception& e) {
        ctx.log->warn("profiler " + p.name + " failed to emit its records: " + std::string(e.what()));
        continue;
      } catch (...) {
        ctx.log->warn("profiler " + p.name + " failed to emit its records: threw something that is not a std::exception");
        continue;
      }
      for (Record& r : own.records) outcome.records.push_back(std::move(r.label("profiler", p.name)));
    }
  }
  nlohmann::json ran = nlohmann::json::array();
  for (const auto& p : profilers) ran.push_back({{"name", p.name}, {"hook_ms", p.hook_ms}});
  if (!profilers.empty()) outcome.observed.fields["profilers"] = ran;
  profilers.clear();
}

void merge_summary(PointOutcome& outcome, const Record& summary) {
  try {
    for (Record& r : outcome.records) {
      for (const auto& [name, metric] : summary.metrics) r.add(name, metric);
      r.artifacts.insert(r.artifacts.end(), summary.artifacts.begin(), summary.artifacts.end());
    }
  } catch (const std::invalid_argument& e) {  // a profiler metric named like a task metric
    outcome.status = RecordStatus::error;
    outcome.message = e.what();
    outcome.records.clear();
  }
}

// Why a point whose task finished did not measure anything usable: no record at
// all, or a number that is NaN or infinite; "" when it did.
std::string invalid_reason(const std::vector<Record>& records) {
  if (records.empty()) return "the task finished without emitting a record";
  const auto bad = [](double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf"; };
  for (const Record& r : records)
    for (const auto& [name, metric] : r.metrics) {
      if (const auto* d = std::get_if<double>(&metric.value); d && !std::isfinite(*d))
        return "metric '" + name + "' is " + bad(*d);
      if (const auto* s = std::get_if<Stats>(&metric.value); s && s->n > 0)
        for (const char* field : {"mean", "median", "min", "max"})
          if (const double x = stat_named(*s, field); !std::isfinite(x))
            return "metric '" + name + "' has " + field + " " + bad(x);
    }
  return "";
}

// The first of `required` that no record of the point carries, "" when none.
std::string missing_metric(const std::vector<Record>& records, const std::vector<std::string>& required) {
  for (const std::string& name : required)
    if (std::none_of(records.begin(), records.end(), [&](const Record& r) {
          return std::any_of(r.metrics.begin(), r.metrics.end(), [&](const auto& m) { return m.first == name; });
        }))
      return name;
  return "";
}

}  // namespace

PointOutcome run_point(const Point& point, Context& ctx, const std::vector<std::string>& required) {
  std::vector<ActiveProfiler> profilers;
  const GpuSample before = sample_gpu(ctx.device);
  PointOutcome outcome = run_task(point, ctx, profilers);
  if (outcome.status == RecordStatus::ok && !outcome.records.empty())
    if (const std::string name = missing_metric(outcome.records, required); !name.empty()) {
      outcome.status = RecordStatus::invalid;
      outcome.message = "metric '" + name + "' is missing from the point's records (task/" + point.task +
                        " declares it for every point with these options)";
    }
  if (outcome.status == RecordStatus::ok)
    if (const std::string why = invalid_reason(outcome.records); !why.empty()) {
      // Kept with its records, the non-finite numbers written as such.
      outcome.status = RecordStatus::invalid;
      outcome.message = why + "; the point measured nothing usable";
    }
  if (!outcome.device_fault) outcome.observed = observe_point(ctx.measurements, ctx.measure, before, sample_gpu(ctx.device));
  const Record summary = end_profilers(ctx, profilers);
  if (outcome.status == RecordStatus::error && !outcome.device_fault) {
    if (const auto fault = device_fault(ctx.device)) {
      outcome.device_fault = true;
      outcome.message += " (" + *fault + ")";
    }
  }
  if (outcome.status != RecordStatus::ok && outcome.status != RecordStatus::invalid) {
    outcome.records.clear();
    if (!outcome.device_fault) {
      try {
        release_cached_memory(ctx.device);
      } catch (const DeviceFault& e) {
        outcome.device_fault = true;
        outcome.message += " (" + std::string(e.what()) + ")";
      }
    }
  }
  if (outcome.records.empty()) outcome.records.emplace_back();
  merge_summary(outcome, summary);
  if (outcome.records.empty()) outcome.records.emplace_back(summary);
  add_profiler_records(ctx, profilers, outcome);
  return outcome;
}

}  // namespace runner
