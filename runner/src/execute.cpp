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
#include "distributed.hpp"
#include "launch.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "report/report.hpp"
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
    at::manual_seed(ctx.dist.rank_seed(point.seed));
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

void write_reports(const YAML::Node& report_node, const std::string& file, const std::filesystem::path& results,
                   const std::vector<std::filesystem::path>& reports_dirs) {
  if (!report_node) return;
  const std::vector<report::ReportSpec> specs = parse_report_specs(report_node, file);
  const auto records = report::read_results(results);
  for (const auto& dir : reports_dirs) {
    std::filesystem::create_directories(dir);
    for (const auto& spec : specs)
      for (const auto& path : report::write_report(spec, records, dir)) std::cerr << "wrote " << path.string() << "\n";
  }
}

}  // namespace

int run_experiment(const RunOptions& options, const PluginRegistry& registry) {
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const std::vector<Point> points = expand_points(exp, registry);
  c10::Device device = choose_device(options.device, exp.document, exp.source);
  if (exp.document["report"]) parse_report_specs(exp.document["report"], exp.source.file);
  const std::string backend = checked_backend(options.backend);
  const std::optional<LaunchEnv> launch = detect_launch_env();

  if (options.dry_run) {
    std::cout << exp.name << ": " << points.size() << " points on " << device.str() << "\n";
    for (const Point& p : points) {
      std::cout << "  " << p.part << "[" << p.index << "] task=" << p.task << " " << describe_point(p)
                << "  (precision=" << p.precision.name << ", warmup=" << p.measure.warmup_steps
                << ", steps=" << p.measure.measured_steps << ")\n";
    }
    return 0;
  }

  check_processes_key(exp, launch ? launch->world_size : 1);
  check_distributed_setup(points, device, launch ? launch->world_size : 1, launch ? ranks_per_node(*launch) : 1,
                          backend, registry);
  // Ranks: each on its local GPU; rank 0 alone owns the run directory's files.
  std::unique_ptr<DistributedSession> session;
  if (launch) {
    if (device.is_cuda()) device = use_local_gpu(launch->local_rank);
    session = std::make_unique<DistributedSession>(*launch, device, backend);
  }
  const int rank = session ? session->dist().rank : 0;
  std::filesystem::path run_dir = options.out;
  if (rank != 0) {
    run_dir = session->agree("run_dir", "");
  } else if (run_dir.empty()) {
    const auto base = std::filesystem::path("runs") / exp.name / utc_timestamp(true);
    run_dir = base;
    for (int n = 2; std::filesystem::exists(run_dir); ++n) run_dir = base.string() + "-" + std::to_string(n);
  } else if (std::filesystem::exists(run_dir / "results.jsonl")) {
    // Never mix two runs' records, nor overwrite a finished run.
    throw ConfigError("--out " + run_dir.string() + ": already holds results.jsonl; choose a new directory");
  }
  if (rank == 0) {
    std::filesystem::create_directories(run_dir);
    if (session) session->agree("run_dir", run_dir.string());
    std::ofstream config(run_dir / "config.yaml");
    config << "# resolved from " << exp.file.string() << (options.smoke ? " with --smoke" : "") << "\n";
    for (const auto& o : options.overrides) config << "# --set " << o << "\n";
    config << exp.document << "\n";
  }
  FileLogger log(run_dir / (rank == 0 ? std::string("log.txt") : "log.rank" + std::to_string(rank) + ".txt"));
  log.info("experiment " + exp.name + " from " + exp.file.string() + ", " + std::to_string(points.size()) +
           " points on " + device.str());
  if (rank == 0) std::cerr << "run directory: " << run_dir.string() << "\n";

  nlohmann::json env = capture_environment(device);
  if (session) {
    env["world_size"] = session->dist().world_size;
    env["backend"] = session->dist().backend;
    env["launcher"] = launch->launcher;
  }
  std::optional<ResultsWriter> results;
  if (rank == 0) results.emplace(run_dir / "results.jsonl");
  Progress progress(rank == 0 ? static_cast<int>(points.size()) : 0);
  int failures = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& point = points[i];
    const std::string label = point.part + " " + describe_point(point);
    if (rank == 0) progress.begin_point(static_cast<int>(i), label);
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
    if (session) {
      ctx.dist = session->dist();
      ctx.artifact_dir /= "rank" + std::to_string(rank);  // no two ranks write one file
    }
    PointOutcome outcome = run_point(point, ctx, registry);
    if (outcome.status == "error") ++failures;
    if (outcome.status != "ok") log.warn(label + ": " + outcome.status + ": " + outcome.error);
    const nlohmann::json params = point_params_json(point, device);
    std::vector<nlohmann::json> records;
    for (const Record& r : outcome.records)
      records.push_back(record_json(exp.name, point, outcome.status, outcome.error, r, params, env));
    if (session && outcome.status != "ok") {
      // Peers may wait in a collective this rank will never join: record what we
      // can, abort the process group and leave; the launcher stops the others.
      const std::string why = "rank " + std::to_string(rank) + ": " + label + ": " + outcome.status + ": " + outcome.error;
      if (rank == 0) {
        for (auto& j : records) results->append(j);
      } else {
        session->send_records(static_cast<int>(i), records);
      }
      leave_error_note(rank, why);
      std::cerr << "runner: " << why << "\n";
      std::cerr.flush();
      session->abort();
      std::_Exit(1);
    }
    if (rank != 0) {
      session->send_records(static_cast<int>(i), records);
      continue;
    }
    if (session) records = merge_rank_records(session->gather_records(static_cast<int>(i), std::move(records)));
    for (const auto& j : records) results->append(j);
    progress.end_point(outcome.status);
  }
  if (rank != 0) return 0;
  progress.finish();
  // Reports always land in the run directory; the project's reports/ only when
  // asked (--reports), so a quick CPU run never overwrites measured GPU tables.
  std::vector<std::filesystem::path> reports_dirs = {run_dir / "reports"};
  if (!options.reports_dir.empty()) reports_dirs.push_back(options.reports_dir);
  write_reports(exp.document["report"], exp.source.file, run_dir / "results.jsonl", reports_dirs);
  if (failures) std::cerr << failures << " point(s) failed; see " << (run_dir / "log.txt").string() << "\n";
  return failures ? 1 : 0;
}

int launch_local(const RunOptions& options, const PluginRegistry& registry, int nproc,
                 const std::vector<std::string>& rank_args) {
  if (nproc < 1) throw ConfigError("--nproc-per-node: must be 1 or more, got " + std::to_string(nproc));
  // Everything a rank would reject, caught once before any rank starts.
  const Experiment exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const std::vector<Point> points = expand_points(exp, registry);
  const c10::Device device = choose_device(options.device, exp.document, exp.source);
  if (exp.document["report"]) parse_report_specs(exp.document["report"], exp.source.file);
  check_distributed_setup(points, device, nproc, nproc, checked_backend(options.backend), registry);
  check_processes_key(exp, nproc);
  if (!options.out.empty() && std::filesystem::exists(options.out / "results.jsonl"))
    throw ConfigError("--out " + options.out.string() + ": already holds results.jsonl; choose a new directory");
  if (options.dry_run) {
    std::cout << exp.name << ": " << points.size() << " points on " << nproc << " ranks (" << device.str() << ")\n";
    return 0;
  }
  const int code = supervise_ranks(LaunchSpec{nproc, rank_args});
  // The rendezvous store's server thread must not race static destructors at exit.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
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
