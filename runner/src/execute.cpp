#include "execute.hpp"

#include <fstream>
#include <iomanip>
#include <iostream>

#include <c10/util/Exception.h>
#include <torch/version.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/Utils.h>

#include "config.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "report/report.hpp"
#include "report_check.hpp"
#include "interrupt.hpp"
#include "run_dir.hpp"
#include "results.hpp"
#include "runner/device.hpp"
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

std::filesystem::path run_dir_of(const std::filesystem::path& results) { return results.parent_path(); }

std::string lower_first(std::string text) {
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

struct PointOutcome {
  std::string status = "ok";
  std::string error;
  std::vector<Record> records;
};

// Runs one point with its profilers; turns OOM and other failures into statuses.
PointOutcome run_point(const Point& point, Context& ctx, const PluginRegistry& registry) {
  PointOutcome outcome;
  Record summary;
  std::vector<std::unique_ptr<Profiler>> profilers;
  try {
    at::manual_seed(point.seed);
    for (const Params& p : point.profilers) {
      profilers.push_back(ctx.create<Profiler>(PluginKind::Profiler, p));
    }
    ctx.profilers.clear();
    for (auto& p : profilers) {
      ctx.profilers.push_back(p.get());
      add_range_listener(p.get());
      p->point_begin(ctx);
    }
    RecordList recorder;
    {
      auto task = ctx.create<Task>(PluginKind::Task, point.params);
      task->run(ctx, point.params, recorder);
    }
    outcome.records = std::move(recorder.records);
  } catch (const c10::OutOfMemoryError& e) {
    outcome.status = "oom";
    outcome.error = e.what_without_backtrace();
  } catch (const c10::Error& e) {
    outcome.status = "error";
    outcome.error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    outcome.status = "error";
    outcome.error = e.what();
  }
  for (auto& p : profilers) {
    try {
      p->point_end(ctx, summary);
    } catch (const std::exception& e) {
      ctx.log->warn("profiler failed at point end: " + std::string(e.what()));
    }
    remove_range_listener(p.get());
  }
  ctx.profilers.clear();
  profilers.clear();
  if (outcome.status != "ok") {
    release_cached_memory(ctx.device);
    outcome.records.clear();
    outcome.records.emplace_back();
  }
  if (outcome.records.empty()) outcome.records.emplace_back();
  for (Record& r : outcome.records) {
    for (const auto& m : summary.metrics) r.metrics.push_back(m);
    r.artifacts.insert(r.artifacts.end(), summary.artifacts.begin(), summary.artifacts.end());
  }
  return outcome;
}

void write_reports(const YAML::Node& report_node, const std::string& file, const std::filesystem::path& results,
                   const std::vector<std::filesystem::path>& reports_dirs, const report::RunSummary& run) {
  if (!report_node) return;
  const report::ReportSpec spec = report::parse_report_spec(report_node, file);
  const auto records = report::read_results(results);
  if (const std::string about = report::run_sentence(run, records); !about.empty())
    std::cerr << "warning: " << run_dir_of(results).string() << ": " << lower_first(about) << "\n";
  for (const auto& dir : reports_dirs) {
    std::filesystem::create_directories(dir);
    for (const auto& path : report::write_report(spec, records, dir, run)) std::cerr << "wrote " << path.string() << "\n";
  }
}

}  // namespace

int run_experiment(const RunOptions& options, const PluginRegistry& registry) {
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const std::vector<Point> points = expand_points(exp, registry, options.max_points);
  const c10::Device device = choose_device(options.device, exp.document, exp.source);
  validate_report(exp, points, registry);

  if (options.dry_run) {
    std::cout << exp.name << ": " << points.size() << " points on " << device.str() << "\n";
    for (const Point& p : points) {
      std::cout << "  " << p.part << "[" << p.index << "] task=" << p.task << " " << describe_point(p)
                << "  (precision=" << p.precision.name << ", warmup=" << p.measure.warmup_steps
                << ", steps=" << p.measure.measured_steps << ")\n";
    }
    return 0;
  }

  preflight_points(points, registry);
  const RunDirectory run = prepare_run_directory(exp, options.overrides, options.smoke, options.out, options.resume);
  const std::filesystem::path& run_dir = run.path;
  FileLogger log(run_dir / "log.txt");
  log.info(std::string(run.resumed ? "resumed" : "experiment") + " " + exp.name + " from " + exp.file.string() +
           ", " + std::to_string(points.size()) + " points on " + device.str() +
           (run.resumed ? ", " + std::to_string(run.finished.size()) + " already recorded" : ""));
  std::cerr << "run directory: " << run_dir.string() << "\n";

  const nlohmann::json env = capture_environment(device);
  ResultsWriter results(run_dir / "results.jsonl");
  Progress progress(static_cast<int>(points.size()));
  int failures = 0;
  InterruptGuard interrupt;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& point = points[i];
    if (run.finished.count({point.part, point.index})) continue;
    const std::string label = point.part + " " + describe_point(point);
    progress.begin_point(static_cast<int>(i), label);
    // A signal during this point: its record says so, and --resume runs it again.
    interrupt.on_interrupt([&, i](const char* signal_name) {
      const std::string note = std::string("interrupted by ") + signal_name + " during point " +
                               std::to_string(i + 1) + "/" + std::to_string(points.size()) + " (" + label + ")";
      results.append(record_json(exp.name, point, "interrupted", note, Record{}, point_params_json(point, device), env));
      log.warn(note + "; continue with: runner " + exp.file.string() + " --resume " + run_dir.string());
    });
    Context ctx;
    ctx.device = device;
    ctx.precision = point.precision;
    ctx.seed = point.seed;
    ctx.run_dir = run_dir;
    ctx.point_name = point.part + "-" + std::to_string(point.index);
    ctx.artifact_dir = run_dir / "artifacts" / ctx.point_name;
    ctx.measure = point.measure;
    ctx.log = &log;
    ctx.plugins = &registry;
    PointOutcome outcome = run_point(point, ctx, registry);
    if (outcome.status == "error") ++failures;
    if (outcome.status != "ok") log.warn(label + ": " + outcome.status + ": " + outcome.error);
    const nlohmann::json params = point_params_json(point, device);
    {
      std::lock_guard<std::mutex> lock(interrupt.mutex());
      for (const Record& r : outcome.records)
        results.append(record_json(exp.name, point, outcome.status, outcome.error, r, params, env));
    }
    interrupt.on_interrupt(nullptr);
    progress.end_point(outcome.status);
  }
  progress.finish();
  // Reports always land in the run directory; the project's reports/ only when
  // asked (--reports), so a quick CPU run never overwrites measured GPU tables.
  std::vector<std::filesystem::path> reports_dirs = {run_dir / "reports"};
  if (!options.reports_dir.empty()) reports_dirs.push_back(options.reports_dir);
  write_reports(exp.document["report"], exp.source.file, run_dir / "results.jsonl", reports_dirs,
                report::RunSummary{options.smoke, points.size()});
  if (failures) std::cerr << failures << " point(s) failed; see " << (run_dir / "log.txt").string() << "\n";
  return failures ? 1 : 0;
}

int render_reports(const std::filesystem::path& run_dir, const std::filesystem::path& reports_dir) {
  const auto config = run_dir / "config.yaml";
  const auto results = run_dir / "results.jsonl";
  if (!std::filesystem::exists(config) || !std::filesystem::exists(results))
    throw ConfigError(run_dir.string() + ": not a run directory (needs config.yaml and results.jsonl)");
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(config.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(config.string() + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!doc["report"]) throw ConfigError(config.string() + ": the experiment declares no report: tables");
  write_reports(doc["report"], config.string(), results, {reports_dir}, run_summary(run_dir));
  return 0;
}

}  // namespace runner
