#include "execute.hpp"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>

#include <c10/util/Exception.h>
#include <torch/version.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/Utils.h>

#include "config.hpp"
#include "gpu_state.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "report/report.hpp"
#include "results.hpp"
#include "runner/device.hpp"
#include "runner/outcome.hpp"
#include "runner/profiler.hpp"
#include "runner/task.hpp"
#include "sweep.hpp"

namespace runner {
namespace {

class FileLogger : public Logger {
 public:
  explicit FileLogger(const std::filesystem::path& file) : out_(file, std::ios::app) {}
  void info(const std::string& line) override { write("info", line); }
  void warn(const std::string& line) override {
    write("warn", line);
    std::cerr << "warning: " << line << "\n";
  }

 private:
  void write(const char* level, const std::string& line) {
    out_ << utc_timestamp(false) << " " << level << " " << line << "\n";
    out_.flush();
  }
  std::ofstream out_;
};

c10::Device choose_device(const std::string& flag, const YAML::Node& doc, const SourceMap& src) {
  std::string wanted = flag;
  if (wanted.empty() && doc["device"]) wanted = doc["device"].as<std::string>();
  if (wanted.empty() || wanted == "auto") wanted = cuda_available() ? "cuda" : "cpu";
  if (wanted == "cpu") return c10::Device(c10::kCPU);
  if (wanted == "cuda") {
    if (!cuda_available())
      throw ConfigError("device cuda requested but no CUDA device is available" +
                        std::string(flag.empty() ? " (" + src.where(doc["device"], "device") + ")" : "") +
                        "; use --device cpu");
    return c10::Device(c10::kCUDA, 0);
  }
  throw ConfigError((flag.empty() ? src.where(doc["device"], "device") : std::string("--device")) +
                    ": device: '" + wanted + "' is not one of cpu, cuda, auto");
}

struct PointOutcome {
  std::string status = "ok";  // ok | oom | error | skipped
  std::string message;        // the error, or why the point was skipped
  bool device_fault = false;  // the device is unusable: end the sweep
  std::vector<Record> records;
  nlohmann::json observed = nlohmann::json::object();  // "measurement", "gpu"
  std::vector<std::string> warnings;                   // noise above target, throttling
};

nlohmann::json gpu_sample_json(const GpuSample& s) {
  if (!s.valid) return nullptr;
  return {{"sm_clock_mhz", s.sm_clock_mhz},
          {"memory_clock_mhz", s.memory_clock_mhz},
          {"temperature_c", s.temperature_c},
          {"power_w", s.power_w},
          {"throttle_reasons", throttle_reason_names(s.throttle_reasons)}};
}

nlohmann::json summary_json(const MeasureSummary& s) {
  nlohmann::json j = {{"mode", s.mode},
                      {"cache", s.cache},
                      {"repetitions", s.repetitions},
                      {"n", s.n},
                      {"rel_stderr", s.rel_stderr},
                      {"target_rel_stderr", s.target_rel_stderr},
                      {"target_met", s.target_met},
                      {"stop_reason", s.stop_reason},
                      {"measured_seconds", s.measured_seconds}};
  return j;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g%%", 100 * fraction);
  return buf;
}

// What the measurement loops and NVML saw: stored with the records, warned about when off.
void observe(const Context& ctx, const GpuSample& before, const GpuSample& after, PointOutcome& outcome) {
  nlohmann::json measurements = nlohmann::json::array();
  std::uint64_t reasons = after.valid ? after.throttle_reasons : 0;
  unsigned min_sm = after.valid ? after.sm_clock_mhz : 0, max_sm = min_sm;
  int samples = 0;
  for (const MeasureSummary& s : ctx.measurements) {
    measurements.push_back(summary_json(s));
    if (s.mode == "adaptive" && !s.target_met)
      outcome.warnings.push_back("relative standard error " + percent(s.rel_stderr) + " is above the target " +
                                 percent(s.target_rel_stderr) + " after " + std::to_string(s.n) + " steps (" +
                                 s.stop_reason + ")");
    if (s.gpu_samples > 0) {
      reasons |= s.throttle_reasons;
      min_sm = samples || after.valid ? std::min(min_sm, s.min_sm_clock_mhz) : s.min_sm_clock_mhz;
      max_sm = std::max(max_sm, s.max_sm_clock_mhz);
      samples += s.gpu_samples;
    }
  }
  if (measurements.size() == 1) outcome.observed["measurement"] = measurements[0];
  else if (!measurements.empty()) outcome.observed["measurement"] = measurements;
  if (!before.valid && !after.valid) return;
  const std::uint64_t slowdown = reasons & kSlowdownReasons;
  nlohmann::json gpu = {{"before", gpu_sample_json(before)}, {"after", gpu_sample_json(after)},
                        {"throttled", slowdown != 0}, {"throttle_reasons", throttle_reason_names(slowdown)}};
  if (samples > 0) gpu["during"] = {{"samples", samples}, {"min_sm_clock_mhz", min_sm}, {"max_sm_clock_mhz", max_sm}};
  outcome.observed["gpu"] = gpu;
  if (slowdown) {
    std::string names;
    for (const auto& n : throttle_reason_names(slowdown)) names += (names.empty() ? "" : ", ") + n;
    outcome.warnings.push_back("GPU clocks were throttled during the point (" + names + "; SM clock " +
                               std::to_string(min_sm) + "-" + std::to_string(max_sm) + " MHz)");
  }
}

// Runs the task inside its profilers; turns exceptions into statuses.
PointOutcome run_task(const Point& point, Context& ctx, std::vector<std::unique_ptr<Profiler>>& profilers) {
  PointOutcome outcome;
  try {
    at::manual_seed(point.seed);
    for (const Params& p : point.profilers) profilers.push_back(ctx.create<Profiler>(PluginKind::Profiler, p));
    for (auto& p : profilers) {
      add_range_listener(p.get());
      p->point_begin(ctx);
    }
    RecordList recorder;
    {
      auto task = ctx.create<Task>(PluginKind::Task, point.params);
      task->run(ctx, point.params, recorder);
    }
    outcome.records = std::move(recorder.records);
  } catch (const SkipPoint& e) {
    outcome.status = "skipped";
    outcome.message = e.what();
  } catch (const DeviceFault& e) {
    outcome.status = "error";
    outcome.message = e.what();
    outcome.device_fault = true;
  } catch (const c10::OutOfMemoryError& e) {
    outcome.status = "oom";
    outcome.message = e.what_without_backtrace();
  } catch (const c10::Error& e) {
    outcome.status = "error";
    outcome.message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    outcome.status = "error";
    outcome.message = e.what();
  }
  return outcome;
}

// Ends the profilers and returns what they add to every record of the point.
Record end_profilers(Context& ctx, std::vector<std::unique_ptr<Profiler>>& profilers) {
  Record summary;
  for (auto& p : profilers) {
    try {
      p->point_end(ctx, summary);
    } catch (const std::exception& e) {
      ctx.log->warn("profiler failed at point end: " + std::string(e.what()));
    }
    remove_range_listener(p.get());
  }
  profilers.clear();
  return summary;
}

void merge_summary(PointOutcome& outcome, const Record& summary) {
  try {
    for (Record& r : outcome.records) {
      for (const auto& [name, metric] : summary.metrics) r.add(name, metric);
      r.artifacts.insert(r.artifacts.end(), summary.artifacts.begin(), summary.artifacts.end());
    }
  } catch (const std::invalid_argument& e) {  // a profiler metric named like a task metric
    outcome.status = "error";
    outcome.message = e.what();
    outcome.records.clear();
  }
}

// Runs one point with its profilers. A failed point keeps one record (with
// the profilers' summary) so tables show the failure in its cell.
PointOutcome run_point(const Point& point, Context& ctx) {
  std::vector<std::unique_ptr<Profiler>> profilers;
  const GpuSample before = sample_gpu(ctx.device);
  PointOutcome outcome = run_task(point, ctx, profilers);
  if (!outcome.device_fault) observe(ctx, before, sample_gpu(ctx.device), outcome);
  const Record summary = end_profilers(ctx, profilers);
  if (outcome.status == "error" && !outcome.device_fault) {
    if (const auto fault = device_fault(ctx.device)) {
      outcome.device_fault = true;
      outcome.message += " (" + *fault + ")";
    }
  }
  if (outcome.status != "ok") {
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
  return outcome;
}

void write_reports(const YAML::Node& report_node, const std::string& file, const std::filesystem::path& results,
                   const std::vector<std::filesystem::path>& reports_dirs) {
  if (!report_node) return;
  const report::ReportSpec spec = report::parse_report_spec(report_node, file);
  const auto records = report::read_results(results);
  for (const auto& dir : reports_dirs) {
    std::filesystem::create_directories(dir);
    for (const auto& path : report::write_report(spec, records, dir)) std::cerr << "wrote " << path.string() << "\n";
  }
}

// What runs, checked before anything does.
struct Plan {
  std::vector<Point> points;
  c10::Device device{c10::kCPU};
};

Plan plan_run(const Experiment& exp, const RunOptions& options, const PluginRegistry& registry) {
  Plan plan;
  plan.points = expand_points(exp, registry);
  plan.device = choose_device(options.device, exp.document, exp.source);
  if (exp.document["report"]) report::parse_report_spec(exp.document["report"], exp.source.file);
  return plan;
}

void print_plan(const Experiment& exp, const Plan& plan) {
  std::cout << exp.name << ": " << plan.points.size() << " points on " << plan.device.str() << "\n";
  for (const Point& p : plan.points) {
    std::cout << "  " << p.part << "[" << p.index << "] task=" << p.task << " " << describe_point(p)
              << "  (precision=" << p.precision.name << ", warmup=" << p.measure.warmup_steps << ", steps="
              << (p.measure.adaptive() ? std::to_string(p.measure.min_steps) + ".." + std::to_string(p.measure.max_steps) +
                                             " until rel_stderr <= " + percent(p.measure.target_rel_stderr)
                                       : std::to_string(p.measure.measured_steps))
              << (p.measure.repetitions > 1 ? " x" + std::to_string(p.measure.repetitions) : "")
              << (p.measure.cache == "cold" ? ", cold cache" : "") << ")\n";
  }
}

std::filesystem::path make_run_dir(const Experiment& exp, const RunOptions& options) {
  std::filesystem::path run_dir = options.out;
  if (run_dir.empty()) {
    const auto base = std::filesystem::path("runs") / exp.name / utc_timestamp(true);
    run_dir = base;
    for (int n = 2; std::filesystem::exists(run_dir); ++n) run_dir = base.string() + "-" + std::to_string(n);
  } else if (std::filesystem::exists(run_dir / "results.jsonl")) {
    // Never mix two runs' records, nor overwrite a finished run.
    throw ConfigError("--out " + run_dir.string() + ": already holds results.jsonl; choose a new directory");
  }
  std::filesystem::create_directories(run_dir);
  std::ofstream config(run_dir / "config.yaml");
  config << "# resolved from " << exp.file.string() << (options.smoke ? " with --smoke" : "") << "\n";
  for (const auto& o : options.overrides) config << "# --set " << o << "\n";
  config << exp.document << "\n";
  return run_dir;
}

// Where one run writes: its directory, log and results.
struct RunOutput {
  RunOutput(std::filesystem::path dir, const c10::Device& device)
      : dir(std::move(dir)), log(this->dir / "log.txt"), results(this->dir / "results.jsonl"),
        env(capture_environment(device)) {}
  std::filesystem::path dir;
  FileLogger log;
  ResultsWriter results;
  nlohmann::json env;
};

Context point_context(const Point& point, const c10::Device& device, RunOutput& run, const PluginRegistry& registry) {
  Context ctx;
  ctx.device = device;
  ctx.precision = point.precision;
  ctx.seed = point.seed;
  ctx.run_dir = run.dir;
  ctx.point_name = point.part + "-" + std::to_string(point.index);
  ctx.artifact_dir = run.dir / "artifacts" / ctx.point_name;
  ctx.measure = point.measure;
  ctx.log = &run.log;
  ctx.plugins = &registry;
  return ctx;
}

void record_outcome(const Experiment& exp, const Point& point, const c10::Device& device, PointOutcome& outcome,
                    RunOutput& run) {
  const nlohmann::json params = point_params_json(point, device);
  std::vector<nlohmann::json> lines;
  try {
    for (const Record& r : outcome.records)
      lines.push_back(record_json(exp.name, point, outcome.status, outcome.message, r, params, run.env, outcome.observed));
  } catch (const std::invalid_argument& e) {  // duplicate metric names
    outcome.status = "error";
    outcome.message = e.what();
    lines = {record_json(exp.name, point, outcome.status, outcome.message, Record{}, params, run.env)};
  }
  for (const auto& line : lines) run.results.append(line);
}

struct SweepResult {
  int failures = 0;
  bool device_fault = false;
};

SweepResult run_points(const Experiment& exp, const Plan& plan, const PluginRegistry& registry, RunOutput& run) {
  SweepResult sweep;
  Progress progress(static_cast<int>(plan.points.size()));
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const Point& point = plan.points[i];
    const std::string label = point.part + " " + describe_point(point);
    progress.begin_point(static_cast<int>(i), label);
    Context ctx = point_context(point, plan.device, run, registry);
    PointOutcome outcome = run_point(point, ctx);
    record_outcome(exp, point, plan.device, outcome, run);
    if (outcome.status == "error") ++sweep.failures;
    if (outcome.status == "skipped") run.log.info(label + ": skipped: " + outcome.message);
    else if (outcome.status != "ok") run.log.warn(label + ": " + outcome.status + ": " + outcome.message);
    for (const std::string& w : outcome.warnings) run.log.warn(label + ": " + w);
    progress.end_point(outcome.status);
    if (outcome.device_fault) {
      sweep.device_fault = true;
      std::cerr << "error: the device is unusable after " << label << " (" << outcome.message << "); stopped after point "
                << i + 1 << " of " << plan.points.size() << ". Records so far are in "
                << (run.dir / "results.jsonl").string() << "\n";
      run.log.warn("sweep stopped: device fault at point " + std::to_string(i + 1) + " of " +
                   std::to_string(plan.points.size()));
      break;
    }
  }
  progress.finish();
  return sweep;
}

}  // namespace

// load -> validate + expand -> (dry run) -> run each point, recording as it goes -> render.
int run_experiment(const RunOptions& options, const PluginRegistry& registry) {
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const Plan plan = plan_run(exp, options, registry);
  if (options.dry_run) {
    print_plan(exp, plan);
    return 0;
  }
  RunOutput run(make_run_dir(exp, options), plan.device);
  run.log.info("experiment " + exp.name + " from " + exp.file.string() + ", " + std::to_string(plan.points.size()) +
               " points on " + plan.device.str());
  std::cerr << "run directory: " << run.dir.string() << "\n";
  const SweepResult sweep = run_points(exp, plan, registry, run);
  // Reports always land in the run directory; the project's reports/ only when
  // asked (--reports), so a quick CPU run never overwrites measured GPU tables.
  std::vector<std::filesystem::path> reports_dirs = {run.dir / "reports"};
  if (!options.reports_dir.empty()) reports_dirs.push_back(options.reports_dir);
  write_reports(exp.document["report"], exp.source.file, run.dir / "results.jsonl", reports_dirs);
  if (sweep.failures) std::cerr << sweep.failures << " point(s) failed; see " << (run.dir / "log.txt").string() << "\n";
  return sweep.failures ? 1 : 0;
}

int render_reports(const std::filesystem::path& run_dir, const std::filesystem::path& reports_dir) {
  const auto config = run_dir / "config.yaml";
  const auto results = run_dir / "results.jsonl";
  if (!std::filesystem::exists(config) || !std::filesystem::exists(results))
    throw ConfigError(run_dir.string() + ": not a run directory (needs config.yaml and results.jsonl)");
  const YAML::Node doc = YAML::LoadFile(config.string());
  if (!doc["report"]) throw ConfigError(config.string() + ": the experiment declares no report: tables");
  write_reports(doc["report"], config.string(), results, {reports_dir});
  return 0;
}

void list_plugins(const PluginRegistry& registry, std::ostream& out) {
  out << std::left << std::setw(11) << "kind" << std::setw(26) << "name" << std::setw(9) << "version"
      << "description  [file]\n";
  for (const auto& p : registry.plugins()) {
    const auto* m = p.manifest;
    out << std::setw(11) << to_string(m->kind) << std::setw(26) << m->name << std::setw(9) << m->version
        << m->description << "  [" << p.file.string() << "]\n";
  }
  for (const auto& e : registry.load_errors())
    out << "skipped " << e.file.string() << ": " << e.message << "\n";
}

bool describe_plugin(const PluginRegistry& registry, const std::string& what, std::ostream& out) {
  const auto slash = what.find('/');
  PluginKind kind;
  if (slash == std::string::npos || !parse_plugin_kind(what.substr(0, slash), kind)) return false;
  const PluginManifest* m = registry.find(kind, what.substr(slash + 1));
  if (m == nullptr) return false;
  out << what << " " << m->version << ": " << m->description << "\n";
  if (m->options.empty()) out << "  (no options)\n";
  for (const OptionSpec& o : m->options) {
    std::string type = to_string(o.type);
    if (o.type == OptionType::Enum) {
      type = "one of ";
      for (size_t i = 0; i < o.choices.size(); ++i) type += (i ? "|" : "") + o.choices[i];
    } else if (o.type == OptionType::Plugin) {
      type = std::string(to_string(o.plugin_kind)) + " plugin";
    }
    const std::string def = o.default_value.empty() ? "(required)" : "default " + o.default_value.to_string();
    out << "  " << std::left << std::setw(20) << o.name << " " << type << ", " << def << "\n      " << o.help << "\n";
  }
  return true;
}

}  // namespace runner
