#include "execute.hpp"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>

#include <c10/util/Exception.h>
#include <torch/version.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/Utils.h>

#include "config.hpp"
#include "distributed.hpp"
#include "launch.hpp"
#include "runner/gpu_state.hpp"
#include "history/run_recorder.hpp"
#include "observation.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "report/report.hpp"
#include "report_check.hpp"
#include "interrupt.hpp"
#include "run_dir.hpp"
#include "results.hpp"
#include "runner/device.hpp"
#include "runner/outcome.hpp"
#include "runner/profiler.hpp"
#include "runner/task.hpp"
#include "stderr_line.hpp"
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
  std::string status = "ok";  // ok | oom | error | skipped
  std::string message;        // the error, or why the point was skipped
  bool device_fault = false;  // the device is unusable: end the sweep
  std::vector<Record> records;
  Observation observed;  // how it was measured, what the GPU did
};

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
Record end_profilers(Context& ctx, std::vector<ActiveProfiler>& profilers) {
  Record summary;
  for (auto& p : profilers) {
    remove_range_listener(p.profiler.get());
    try {
      timed_hook(p, [&] { p.profiler->point_end(ctx, summary); });
    } catch (const std::exception& e) {
      ctx.log->warn("profiler " + p.name + " failed at point end: " + std::string(e.what()));
    }
  }
  return summary;
}

// The profilers' own records (after the task's, labelled profiler=<name>), and
// which profilers ran with their hook time, in every record of the point.
void add_profiler_records(Context& ctx, std::vector<ActiveProfiler>& profilers, PointOutcome& outcome) {
  if (outcome.status == "ok") {
    const std::vector<Record> task_records = outcome.records;
    for (auto& p : profilers) {
      RecordList own;
      try {
        timed_hook(p, [&] { p.profiler->emit_records(ctx, task_records, own); });
      } catch (const std::exception& e) {
        ctx.log->warn("profiler " + p.name + " failed to emit its records: " + std::string(e.what()));
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
    outcome.status = "error";
    outcome.message = e.what();
    outcome.records.clear();
  }
}

// Runs one point with its profilers. A failed point keeps one record (with
// the profilers' summary) so tables show the failure in its cell.
PointOutcome run_point(const Point& point, Context& ctx) {
  std::vector<ActiveProfiler> profilers;
  const GpuSample before = sample_gpu(ctx.device);
  PointOutcome outcome = run_task(point, ctx, profilers);
  if (!outcome.device_fault) outcome.observed = observe_point(ctx.measurements, before, sample_gpu(ctx.device));
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
  add_profiler_records(ctx, profilers, outcome);
  return outcome;
}

// `report:` is one report or a list of them (one run answering several questions).
std::vector<report::ReportSpec> parse_report_specs(const YAML::Node& node, const std::string& file) {
  std::vector<report::ReportSpec> specs;
  if (node.IsSequence()) {
    for (const auto& item : node) specs.push_back(report::parse_report_spec(item, file));
  } else {
    specs.push_back(report::parse_report_spec(node, file));
  }
  return specs;
}

void write_reports(const std::vector<report::ReportSpec>& specs, const std::vector<nlohmann::json>& records,
                   const std::vector<std::filesystem::path>& reports_dirs, const report::RunSummary& run) {
  for (const auto& dir : reports_dirs) {
    std::filesystem::create_directories(dir);
    for (const auto& spec : specs)
      for (const auto& path : report::write_report(spec, records, dir, run)) std::cerr << "wrote " << path.string() << "\n";
  }
}

void write_reports(const YAML::Node& report_node, const std::string& file, const std::filesystem::path& results,
                   const std::vector<std::filesystem::path>& reports_dirs, const report::RunSummary& run) {
  if (!report_node) return;
  const std::vector<report::ReportSpec> specs = parse_report_specs(report_node, file);
  const auto records = report::read_results(results);
  if (const std::string about = report::run_sentence(run, records); !about.empty())
    std::cerr << "warning: " << run_dir_of(results).string() << ": " << lower_first(about) << "\n";
  write_reports(specs, records, reports_dirs, run);
}

// What runs, checked before anything does.
struct Plan {
  std::vector<Point> points;
  c10::Device device{c10::kCPU};
};

Plan plan_run(const Experiment& exp, const RunOptions& options, const PluginRegistry& registry) {
  Plan plan;
  plan.points = expand_points(exp, registry, options.max_points);
  plan.device = choose_device(options.device, exp.document, exp.source);
  // Tables are checked against every part, so leaving one out of a run
  // (`enabled: false`) does not make a valid report spec invalid.
  const bool all_enabled = experiment_parts(exp, true).size() == experiment_parts(exp).size();
  validate_report(exp, all_enabled ? plan.points : expand_points(exp, registry, options.max_points, true), registry);
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

// Rank 0 prepares the run directory (new, or the one --resume names); the other
// ranks only learn its path, so no two processes create or write the same files.
RunDirectory shared_run_directory(const Experiment& exp, const RunOptions& options, DistributedSession* session) {
  if (session && !options.resume.empty())
    throw ConfigError("--resume: not supported for multi-process runs (ranks would disagree on the points); "
                      "start a new run");
  if (session && session->dist().rank != 0) {
    RunDirectory shared;
    shared.path = session->agree("run_dir", "");
    return shared;
  }
  RunDirectory prepared = prepare_run_directory(exp, options.overrides, options.smoke, options.out, options.resume);
  if (session) session->agree("run_dir", prepared.path.string());
  return prepared;
}

// Where one run writes: its directory, log and results. In a multi-process run
// only rank 0 writes results.jsonl; every rank has its own log.
struct RunOutput {
  RunOutput(std::filesystem::path dir, const c10::Device& device, DistributedSession* session)
      : dir(std::move(dir)), session(session), rank(session ? session->dist().rank : 0),
        log(this->dir / (rank == 0 ? std::string("log.txt") : "log.rank" + std::to_string(rank) + ".txt")),
        env(capture_environment(device)) {
    if (rank == 0) results.emplace(this->dir / "results.jsonl");
    if (session) {
      env["world_size"] = session->dist().world_size;
      env["backend"] = session->dist().backend;
    }
  }
  std::filesystem::path dir;
  DistributedSession* session;
  int rank;
  FileLogger log;
  std::optional<ResultsWriter> results;
  nlohmann::json env;
  std::unique_ptr<history::RunRecorder> history;  // each point's records also go to the run history
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
  if (run.session) {
    ctx.dist = run.session->dist();
    ctx.artifact_dir /= "rank" + std::to_string(run.rank);  // no two ranks write one file
  }
  return ctx;
}

void record_outcome(const Experiment& exp, const Point& point, int point_index, const c10::Device& device,
                    PointOutcome& outcome, RunOutput& run) {
  const nlohmann::json params = point_params_json(point, device);
  std::vector<nlohmann::json> lines;
  try {
    for (const Record& r : outcome.records)
      lines.push_back(record_json(exp.name, point, outcome.status, outcome.message, r, params, run.env, outcome.observed.fields));
  } catch (const std::invalid_argument& e) {  // duplicate metric names
    outcome.status = "error";
    outcome.message = e.what();
    lines = {record_json(exp.name, point, outcome.status, outcome.message, Record{}, params, run.env)};
  }
  if (!run.session) {
    for (const auto& line : lines) run.results->append(line);
    if (run.history) run.history->add_point(lines);
    return;
  }
  const int index = point_index;
  if (outcome.status != "ok" && outcome.status != "skipped") {
    // Peers may wait in a collective this rank will never join: record what we
    // can, abort the process group and leave; the launcher stops the others.
    const std::string why = "rank " + std::to_string(run.rank) + ": " + point.part + " " + describe_point(point) + ": " +
                            outcome.status + ": " + outcome.message;
    if (run.rank == 0) {
      for (const auto& line : lines) run.results->append(line);
    } else {
      run.session->send_records(index, lines);
    }
    leave_error_note(run.rank, why);
    write_stderr_line("runner: " + why);
    run.session->abort();
    std::_Exit(1);
  }
  if (run.rank != 0) {
    run.session->send_records(index, lines);
    return;
  }
  const auto merged = merge_rank_records(run.session->gather_records(index, std::move(lines)));
  for (const auto& line : merged) run.results->append(line);
  if (run.history) run.history->add_point(merged);
}

struct SweepResult {
  int failures = 0;
  bool device_fault = false;
};

// `finished`: points a resumed run already recorded; they are not run again.
SweepResult run_points(const Experiment& exp, const Plan& plan, const PluginRegistry& registry, RunOutput& run,
                       const std::set<std::pair<std::string, int>>& finished) {
  SweepResult sweep;
  Progress progress(run.rank == 0 ? static_cast<int>(plan.points.size()) : 0);
  InterruptGuard interrupt;
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const Point& point = plan.points[i];
    if (finished.count({point.part, point.index})) continue;
    const std::string label = point.part + " " + describe_point(point);
    if (run.rank == 0) progress.begin_point(static_cast<int>(i), label);
    // A signal during this point: its record says so, and --resume runs it again.
    interrupt.on_interrupt([&, i](const char* signal_name) {
      const std::string note = std::string("interrupted by ") + signal_name + " during point " +
                               std::to_string(i + 1) + "/" + std::to_string(plan.points.size()) + " (" + label + ")";
      if (run.results) run.results->append(record_json(exp.name, point, "interrupted", note, Record{},
                                     point_params_json(point, plan.device), run.env));
      run.log.warn(note + "; continue with: runner " + exp.file.string() + " --resume " + run.dir.string());
    });
    Context ctx = point_context(point, plan.device, run, registry);
    PointOutcome outcome = run_point(point, ctx);
    {
      std::lock_guard<std::mutex> lock(interrupt.mutex());
      record_outcome(exp, point, static_cast<int>(i), plan.device, outcome, run);
    }
    interrupt.on_interrupt(nullptr);
    if (outcome.status == "error") ++sweep.failures;
    if (outcome.status == "skipped") run.log.info(label + ": skipped: " + outcome.message);
    else if (outcome.status != "ok") run.log.warn(label + ": " + outcome.status + ": " + outcome.message);
    for (const std::string& w : outcome.observed.warnings) run.log.warn(label + ": " + w);
    if (run.rank == 0) progress.end_point(outcome.status);
    if (outcome.device_fault) {
      sweep.device_fault = true;
      std::cerr << "error: the device is unusable after " << label << " (" << outcome.message << "); stopped after point "
                << i + 1 << " of " << plan.points.size() << ". Records so far are in "
                << (run.dir / "results.jsonl").string() << "\n";
      if (run.session) {  // peers would wait for this rank forever
        leave_error_note(run.rank, "rank " + std::to_string(run.rank) + ": device fault: " + outcome.message);
        run.session->abort();
        std::_Exit(1);
      }
      run.log.warn("sweep stopped: device fault at point " + std::to_string(i + 1) + " of " +
                   std::to_string(plan.points.size()));
      break;
    }
  }
  if (run.rank == 0) progress.finish();
  return sweep;
}

}  // namespace

// load -> validate + expand -> (dry run) -> run each point, recording as it goes -> render.
int run_experiment(const RunOptions& options, const PluginRegistry& registry) {
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  Plan plan = plan_run(exp, options, registry);
  if (options.dry_run) {
    print_plan(exp, plan);
    return 0;
  }
  preflight_points(plan.points, registry);
  // Ranks (runner launch, torchrun, srun): each on its local GPU; rank 0 alone
  // owns the run directory's files.
  const std::string backend = checked_backend(options.backend);
  const std::optional<LaunchEnv> launch = detect_launch_env();
  check_processes_key(exp, launch ? launch->world_size : 1);
  check_distributed_setup(plan.points, plan.device, launch ? launch->world_size : 1,
                          launch ? ranks_per_node(*launch) : 1, backend, registry);
  std::unique_ptr<DistributedSession> session;
  if (launch) {
    if (plan.device.is_cuda()) plan.device = use_local_gpu(launch->local_rank);
    session = std::make_unique<DistributedSession>(*launch, plan.device, backend);
  }
  const RunDirectory run_dir = shared_run_directory(exp, options, session.get());
  RunOutput run(run_dir.path, plan.device, session.get());
  if (launch) run.env["launcher"] = launch->launcher;
  run.log.info(std::string(run_dir.resumed ? "resumed" : "experiment") + " " + exp.name + " from " +
               exp.file.string() + ", " + std::to_string(plan.points.size()) + " points on " + plan.device.str() +
               (run_dir.resumed ? ", " + std::to_string(run_dir.finished.size()) + " already recorded" : ""));
  if (run.rank == 0) {
    std::cerr << "run directory: " << run.dir.string() << "\n";
    run.history = std::make_unique<history::RunRecorder>(
        options.history, exp.document["history"] ? exp.document["history"].as<std::string>() : "", exp.name, run.dir,
        run.env, options.smoke);
  }
  const SweepResult sweep = run_points(exp, plan, registry, run, run_dir.finished);
  if (run.rank != 0) return 0;
  run.history->finish();
  // Reports always land in the run directory; the project's reports/ only when
  // asked (--reports), so a quick CPU run never overwrites measured GPU tables.
  std::vector<std::filesystem::path> reports_dirs = {run.dir / "reports"};
  if (!options.reports_dir.empty()) reports_dirs.push_back(options.reports_dir);
  write_reports(exp.document["report"], exp.source.file, run.dir / "results.jsonl", reports_dirs,
                report::RunSummary{options.smoke, plan.points.size()});
  if (sweep.failures) std::cerr << sweep.failures << " point(s) failed; see " << (run.dir / "log.txt").string() << "\n";
  return sweep.failures ? 1 : 0;
}

int launch_local(const RunOptions& options, const PluginRegistry& registry, int nproc,
                 const std::vector<std::string>& rank_args) {
  if (nproc < 1) throw ConfigError("--nproc-per-node: must be 1 or more, got " + std::to_string(nproc));
  // Everything a rank would reject, caught once before any rank starts.
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const Plan plan = plan_run(exp, options, registry);
  check_distributed_setup(plan.points, plan.device, nproc, nproc, checked_backend(options.backend), registry);
  check_processes_key(exp, nproc);
  if (!options.out.empty() && std::filesystem::exists(options.out / "results.jsonl"))
    throw ConfigError("--out " + options.out.string() + ": already holds results.jsonl; choose a new directory");
  if (options.dry_run) {
    print_plan(exp, plan);
    return 0;
  }
  const int code = supervise_ranks(LaunchSpec{nproc, rank_args});
  // The rendezvous store's server thread must not race static destructors at exit.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
}

int render_reports(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& reports_dir,
                   const std::filesystem::path& spec_file) {
  if (run_dirs.empty()) throw ConfigError("runner report: expected a run directory (runner report --help)");
  // Several runs of one experiment (e.g. `runner launch` with 2, 4 and 6 processes)
  // fill one report: same experiment, same report spec; the first run's spec renders
  // unless --spec names the experiment file whose report spec renders all of them.
  YAML::Node first_report;
  std::string first_name, first_config;
  if (!spec_file.empty()) {
    const YAML::Node spec = load_experiment(spec_file, {}, false).document;
    if (!spec["report"]) throw ConfigError("--spec " + spec_file.string() + ": the experiment declares no report: tables");
    first_report = spec["report"];
    first_name = YAML::Dump(spec["experiment"]);
    first_config = spec_file.string();
  }
  std::vector<nlohmann::json> records;
  report::RunSummary summary;
  for (std::size_t i = 0; i < run_dirs.size(); ++i) {
    const auto& run_dir = run_dirs[i];
    const auto config = run_dir / "config.yaml";
    const auto results = run_dir / "results.jsonl";
    if (!std::filesystem::exists(config) || !std::filesystem::exists(results))
      throw ConfigError(run_dir.string() + ": not a run directory (needs config.yaml and results.jsonl)");
    const YAML::Node doc = load_yaml_file(config);
    if (!doc["report"] && spec_file.empty())
      throw ConfigError(config.string() + ": the experiment declares no report: tables");
    const std::string name = doc["experiment"] ? YAML::Dump(doc["experiment"]) : "";
    if (!spec_file.empty()) {
      if (name != first_name)
        throw ConfigError(config.string() + ": a run of another experiment than --spec " + spec_file.string() +
                          " (experiment: " + first_name + "); pass the experiment file that made it");
    } else if (i == 0) {
      first_report = doc["report"];
      first_name = name;
      first_config = config.string();
    } else if (name != first_name || YAML::Dump(doc["report"]) != YAML::Dump(first_report)) {
      throw ConfigError(config.string() + ": not the experiment or report spec of " + first_config +
                        "; only runs of one experiment with the same report merge into one report (or render "
                        "them all with --spec experiments/<name>.yaml)");
    }
    const report::RunSummary run = run_summary(run_dir);
    auto run_records = report::read_results(results);
    if (const std::string about = report::run_sentence(run, run_records); !about.empty())
      std::cerr << "warning: " << run_dir.string() << ": " << lower_first(about) << "\n";
    summary.smoke = summary.smoke || run.smoke;
    summary.planned_points += run.planned_points;
    for (auto& r : run_records) {
      if (run_dirs.size() > 1) r[report::kSourceRunKey] = static_cast<long long>(i);
      records.push_back(std::move(r));
    }
  }
  write_reports(parse_report_specs(first_report, first_config), records, {reports_dir}, summary);
  return 0;
}

}  // namespace runner
