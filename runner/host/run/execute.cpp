// The sweep's spine: load the experiment, check everything that can be checked
// before a point runs, set up the ranks and the run directory, run the points one
// by one (point.cpp), recording each as it finishes (point_record.cpp), then write
// the reports (output/run_reports.cpp).
#include "run/execute.hpp"

#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "config/report_spec_check.hpp"
#include "config/shard.hpp"
#include "config/sweep.hpp"
#include "distributed/distributed.hpp"
#include "distributed/launch.hpp"
#include "history/run_recorder.hpp"
#include "history/store.hpp"
#include "output/environment.hpp"
#include "output/point_guard.hpp"
#include "output/run_dir.hpp"
#include "output/run_reports.hpp"
#include "run/interrupt.hpp"
#include "run/point.hpp"
#include "run/point_record.hpp"
#include "run/point_timeout.hpp"
#include "run/progress.hpp"
#include "run/run_output.hpp"
#include "run/workers.hpp"
#include "runner/child_process.hpp"
#include "runner/device.hpp"

namespace runner {
namespace {

// `smoke`: --smoke given; `points`: the sweep's size, for the hint on a machine without a GPU.
c10::Device choose_device(const std::string& flag, const ExperimentSpec& exp, bool smoke, std::size_t points) {
  std::string wanted = flag;
  if (wanted.empty()) wanted = exp.device;
  if (wanted.empty() || wanted == "auto") wanted = cuda_available() ? "cuda" : "cpu";
  if (wanted == "cpu") return c10::Device(c10::kCPU);
  if (wanted == "cuda") {
    if (!cuda_available())
      throw ConfigError("device cuda requested but no CUDA device is available" +
                        std::string(flag.empty() ? " (" + exp.device_where + ")" : "") +
                        // A GPU-sized sweep on a CPU runs for hours: the smoke version is what
                        // a CPU box can check.
                        (!smoke && exp.has_smoke ? "; on this machine try --smoke --device cpu (the experiment's "
                                                  "seconds-long version; its full sweep of " +
                                                      std::to_string(points) + " points is sized for a GPU)"
                                                : std::string("; use --device cpu")));
    return c10::Device(c10::kCUDA, 0);
  }
  throw ConfigError((flag.empty() ? exp.device_where : std::string("--device")) +
                    ": device: '" + wanted + "' is not one of cpu, cuda, auto");
}

// What runs, checked before anything does.
struct Plan {
  std::vector<Point> points;
  c10::Device device{c10::kCPU};
};

std::string point_label(const Point& p) { return p.part + " " + describe_point(p); }

// --filter: a regex searched in each point's label, as progress prints it.
void filter_points(std::vector<Point>& points, const std::string& filter) {
  const std::regex pattern(filter);
  const std::string example = points.empty() ? "" : point_label(points.front());
  std::erase_if(points, [&](const Point& p) { return !std::regex_search(point_label(p), pattern); });
  if (points.empty())
    throw ConfigError("--filter '" + filter + "' matches none of the points (labels look like '" + example +
                      "'; --dry-run lists them)");
}

Plan plan_run(const ExperimentSpec& exp, const RunOptions& options, const PluginRegistry& registry) {
  Plan plan;
  plan.points = expand_points(exp, registry, options.max_points);
  plan.device = choose_device(options.device, exp, options.smoke, plan.points.size());
  // Tables are checked against every part, so leaving one out of a run
  // (`enabled: false`) does not make a valid report spec invalid.
  const bool all_enabled = exp.parts_to_run(true).size() == exp.parts_to_run().size();
  validate_report(exp, all_enabled ? plan.points : expand_points(exp, registry, options.max_points, true), registry);
  if (!options.filter.empty()) filter_points(plan.points, options.filter);
  if (options.shard) keep_shard_points(plan.points, *options.shard);
  return plan;
}

void print_plan(const ExperimentSpec& exp, const Plan& plan) {
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
RunDirectory shared_run_directory(const ExperimentSpec& exp, const RunOptions& options, DistributedSession* session) {
  if (session && session->dist().rank != 0) {
    RunDirectory shared;
    shared.path = session->agree("run_dir", "");
    // A resumed run: every rank skips the points rank 0 found recorded, so they meet in the same collectives.
    std::istringstream finished(session->agree("finished_points", ""));
    for (std::string part; finished >> std::quoted(part);) {
      int index = 0;
      finished >> index;
      shared.finished.emplace(part, index);
    }
    shared.resumed = !options.resume.empty();
    return shared;
  }
  RunDirectory prepared =
      prepare_run_directory(exp, options.overrides, options.smoke, options.out, options.resume, options.shard);
  if (session) {
    session->agree("run_dir", prepared.path.string());
    std::ostringstream finished;
    for (const auto& [part, index] : prepared.finished) finished << std::quoted(part) << " " << index << " ";
    session->agree("finished_points", finished.str());
  }
  return prepared;
}

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

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

// A point that ran past measure.timeout_s and then returned (its children stopped):
// whatever it recorded is cut short, so only the timeout stays.
void mark_timed_out(PointOutcome& outcome, double timeout_s) {
  std::string message =
      "ran past measure.timeout_s (" + seconds_text(timeout_s) + "); its child processes were stopped";
  if (!outcome.message.empty()) message += " (the task then said: " + outcome.message + ")";
  outcome.status = RecordStatus::timeout;
  outcome.message = message;
  outcome.records.assign(1, Record{});
}

struct SweepResult {
  int failures = 0;
  bool device_fault = false;
};

// `finished`: points a resumed run already recorded; they are not run again.
// `render_reports`: the tables of the records so far, for a Ctrl-C (rank 0; else empty).
// `take` (a pool's worker): runs only the points it returns true for, and prints no progress.
SweepResult run_points(const ExperimentSpec& exp, const Plan& plan, const PluginRegistry& registry, RunOutput& run,
                       const std::set<std::pair<std::string, int>>& finished,
                       const std::function<void()>& render_reports,
                       const std::function<bool(std::size_t)>& take = {}) {
  SweepResult sweep;
  Progress progress(run.rank == 0 && !take ? static_cast<int>(plan.points.size()) : 0);
  InterruptGuard interrupt;
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const Point& point = plan.points[i];
    if (finished.count({point.part, point.index})) continue;
    if (take && !take(i)) continue;
    const std::string label = point_label(point);
    if (run.rank == 0) progress.begin_point(static_cast<int>(i), label);
    // A signal during this point: its record says so, and --resume runs it again.
    interrupt.on_interrupt([&, i](const char* signal_name) {
      const std::string note = std::string("interrupted by ") + signal_name + " during point " +
                               std::to_string(i + 1) + "/" + std::to_string(plan.points.size()) + " (" + label + ")";
      record_stopped_point(exp, point, RecordStatus::interrupted, note, plan.device, run);
      run.log.warn(note + "; " + run.resume_hint);
      if (render_reports) render_reports();
    });
    Context ctx = point_context(point, plan.device, run, registry);
    // Past its time limit, with its children stopped, and still running: plugin code
    // that nothing can interrupt. Its record says so and the run ends (124, as
    // timeout(1)); --resume runs it again.
    const auto stuck = [&, i] {
      std::lock_guard<std::mutex> lock(interrupt.mutex());
      const std::string note = "ran past measure.timeout_s (" + seconds_text(point.timeout_s) +
                               ") and did not return once its child processes were stopped; the run stopped at point " +
                               std::to_string(i + 1) + "/" + std::to_string(plan.points.size());
      record_stopped_point(exp, point, RecordStatus::timeout, note, plan.device, run);
      run.log.warn(label + ": timeout: " + note + "; " + run.resume_hint);
      if (render_reports) render_reports();
      exit_now(124);
    };
    PointOutcome outcome = [&] {
      const PointGuard guard(death_note(exp, point, plan.device, run, label));
      const PointTimeout timeout(point.timeout_s, point_timeout_grace(point.timeout_s), stuck);
      PointOutcome returned = run_point(point, ctx, required_metrics(point.task, point.params, registry));
      if (timeout.expired()) mark_timed_out(returned, point.timeout_s);
      return returned;
    }();
    // A process the point started that left its group (setsid) and outlived its
    // parent came to us (adopt_orphaned_descendants): it must not outlive the point.
    if (const int orphans = end_orphaned_children(); orphans > 0)
      run.log.warn(label + ": ended " + std::to_string(orphans) +
                   " process(es) the point left running outside its process group");
    {
      std::lock_guard<std::mutex> lock(interrupt.mutex());
      record_point(exp, point, static_cast<int>(i), plan.device, outcome, run);
    }
    // Between points a signal still leaves the tables of the points done.
    interrupt.on_interrupt([&](const char*) {
      if (render_reports) render_reports();
    });
    if (outcome.status == RecordStatus::error || outcome.status == RecordStatus::timeout ||
        outcome.status == RecordStatus::invalid)
      ++sweep.failures;
    if (outcome.status == RecordStatus::skipped) run.log.info(label + ": skipped: " + outcome.message);
    else if (outcome.status != RecordStatus::ok)
      run.log.warn(label + ": " + status_name(outcome.status) + ": " + outcome.message);
    for (const std::string& w : outcome.observed.warnings) run.log.warn(label + ": " + w);
    if (run.rank == 0) progress.end_point(outcome.status, outcome.records, outcome.message);
    if (outcome.device_fault) {
      sweep.device_fault = true;
      std::cerr << "error: the device is unusable after " << label << " (" << outcome.message << "); stopped after point "
                << i + 1 << " of " << plan.points.size() << ". Records so far are in "
                << (run.dir / "results.jsonl").string() << "\n";
      // Peers would wait for this rank forever.
      if (run.session) leave_peers(run, "rank " + std::to_string(run.rank) + ": device fault: " + outcome.message);
      run.log.warn("sweep stopped: device fault at point " + std::to_string(i + 1) + " of " +
                   std::to_string(plan.points.size()));
      break;
    }
  }
  if (run.rank == 0) progress.finish();
  return sweep;
}

// A worker of a pool (workers.hpp): the points the parent hands it, records spooled
// into <run>/workers/<k>/ for the parent to append.
// A multi-process point's ranks (started by `runner launch`) run only that point.
int run_as_worker(const ExperimentSpec& exp, Plan& plan, const PluginRegistry& registry, const RunOptions& options) {
  const std::optional<WorkerGroup> group = worker_group();
  const std::optional<LaunchEnv> launch = group ? detect_launch_env() : std::nullopt;
  std::unique_ptr<DistributedSession> session;
  if (launch) {
    if (plan.device.is_cuda()) plan.device = use_local_gpu(launch->local_rank);
    session = std::make_unique<DistributedSession>(*launch, plan.device, options.backend);
  }
  RunOutput run(worker_dir(options.worker_of, options.worker_index, group), plan.device, session.get());
  run.env["plugin_commits"] = plugin_commits(plugin_files(plan.points, registry));
  if (options.shard) run.env["shard"] = options.shard->text();
  if (launch) run.env["launcher"] = launch->launcher;
  name_worker(run.env, options.worker_index, group, launch ? launch->local_rank : 0);
  run.resume_hint = "the run's parent process resumes it";
  if (group) {
    run_points(exp, plan, registry, run, {}, {}, [&](std::size_t i) { return i == group->position; });
    return 0;
  }
  WorkerChannel channel;
  run_points(exp, plan, registry, run, {}, {}, [&](std::size_t i) { return channel.take(i); });
  channel.finish();
  return 0;
}

}  // namespace

// load -> validate + expand -> (dry run) -> run each point, recording as it goes -> render.
int run_experiment(const RunOptions& options, const PluginRegistry& registry, std::filesystem::path* run_dir_out) {
  const ExperimentSpec exp = load_experiment(options.experiment, options.overrides, options.smoke);
  Plan plan = plan_run(exp, options, registry);
  if (options.dry_run) {
    print_plan(exp, plan);
    return 0;
  }
  if (!options.worker_of.empty()) return run_as_worker(exp, plan, registry, options);
  preflight_points(plan.points, registry);
  adopt_orphaned_descendants();
  // Ranks (runner launch, torchrun, srun): each on its local GPU; rank 0 alone
  // owns the run directory's files.
  const std::string& backend = options.backend;
  const std::optional<LaunchEnv> launch = detect_launch_env();
  const PoolSpec pool = pool_spec(options, plan.device, launch.has_value());
  check_point_processes(exp, plan.points, pool, launch ? launch->world_size : 1);
  // On a pool a multi-process point's own `runner launch` checks it.
  check_distributed_setup(pool.workers > 0 ? one_process_points(exp, plan.points) : plan.points, plan.device,
                          launch ? launch->world_size : 1, launch ? ranks_per_node(*launch) : 1, backend, registry);
  std::unique_ptr<DistributedSession> session;
  if (launch) {
    if (plan.device.is_cuda()) plan.device = use_local_gpu(launch->local_rank);
    session = std::make_unique<DistributedSession>(*launch, plan.device, backend);
  }
  const std::filesystem::path history_file = history::resolve_history_path(options.history, exp.history);
  // A history that cannot take the run (a read-only mount) is refused before the
  // run directory is made or touched: a resumed run's records stay as they were.
  if (!launch || launch->rank == 0) {
    try {
      history::check_writable(history_file);
    } catch (const std::runtime_error& e) {
      throw ConfigError(e.what());
    }
  }
  const RunDirectory run_dir = shared_run_directory(exp, options, session.get());
  RunOutput run(run_dir.path, plan.device, session.get());
  if (run_dir_out) *run_dir_out = run.dir;
  ResumeCommand how{options.overrides, options.smoke, options.device};
  if (launch) {
    how.ranks_per_node = ranks_per_node(*launch);
    how.more_nodes = launch->world_size > how.ranks_per_node;
  }
  if (options.shard) how.shard = options.shard->text();
  if (pool.workers > 0) how.pool = pool.gpus.empty() ? "--workers " + std::to_string(pool.workers) : "--gpus " + options.gpus;
  run.resume_hint = resume_hint(exp, how, run.dir);
  // --filter and --max-points leave points of the sweep out, so the run is partial: its report
  // renders a dash where a value's rows are missing, as `runner report` on it would (a shard
  // counts as whole: its shard's points are all it plans).
  const std::size_t planned = options.shard ? plan.points.size() : count_points(exp);
  const report::RunSummary summary{options.smoke, planned, options.allow_dirty};
  if (run.rank == 0 && !options.reports_dir.empty() && !options.dry_run) {
    // Before measuring, not after: the records this run will write name this commit.
    StoredRecord would_write;
    would_write.env = run.env;
    refuse_unclean({would_write}, options.reports_dir, summary, "this run (--reports " + options.reports_dir.string() + ")");
  }
  run.env["plugin_commits"] = plugin_commits(plugin_files(plan.points, registry));
  // The history's point identity and build: what was asked (overrides, filter)
  // and which plugin files ran.
  run.env["plugins"] = plugin_identities(plugin_files(plan.points, registry));
  run.env["overrides"] = options.overrides;
  if (!options.filter.empty()) run.env["filter"] = options.filter;
  if (launch) run.env["launcher"] = launch->launcher;
  if (options.shard) run.env["shard"] = options.shard->text();
  run.log.info(std::string(run_dir.resumed ? "resumed" : "experiment") + " " + exp.name + " from " +
               exp.file.string() + ", " + std::to_string(plan.points.size()) + " points on " + plan.device.str() +
               (run_dir.resumed ? ", " + std::to_string(run_dir.finished.size()) + " already recorded" : ""));
  if (run.rank == 0) {
    std::cerr << "run directory: " << run.dir.string() << "\n";
    run.history =
        std::make_unique<history::RunRecorder>(history_file, exp.name, run.dir, run.env, options.smoke);
  }
  // Reports always land in the run directory; the project's reports/ only when
  // asked (--reports), so a quick CPU run never overwrites measured GPU tables.
  std::vector<std::filesystem::path> reports_dirs = {run.dir / "reports"};
  if (!options.reports_dir.empty()) reports_dirs.push_back(options.reports_dir);
  const auto render = [&] {
    write_run_reports(exp.reports(), exp.source.file, run.dir / "results.jsonl", reports_dirs,
                      summary);
  };
  std::function<void()> render_so_far;
  if (run.rank == 0)
    render_so_far = [&] {
      try {
        render();
      } catch (const std::exception& e) {
        std::cerr << "runner: the reports of the finished points failed: " << e.what() << "\n";
      }
    };
  SweepResult sweep;
  if (pool.workers > 0)
    sweep.failures = run_pool(exp, plan.points, plan.device, run, run_dir.finished, pool, render_so_far).failures;
  else
    sweep = run_points(exp, plan, registry, run, run_dir.finished, render_so_far);
  if (run.rank != 0) return 0;
  run.history->finish();
  render();
  run.log.info("finished: " + std::to_string(plan.points.size()) + " points, " + std::to_string(sweep.failures) +
               " failed");
  if (sweep.failures) std::cerr << sweep.failures << " point(s) failed; see " << (run.dir / "log.txt").string() << "\n";
  return sweep.failures ? 1 : 0;
}

int launch_local(const RunOptions& options, const PluginRegistry& registry, const LaunchSpec& spec) {
  check_launch_spec(spec);
  if (!options.resume.empty() && spec.node_rank == 0 && !std::filesystem::exists(options.resume / "config.yaml"))
    throw ConfigError("--resume " + options.resume.string() + ": not a run directory (no config.yaml)");
  // Everything a rank would reject, caught once before any rank starts.
  const ExperimentSpec exp = load_experiment(options.experiment, options.overrides, options.smoke);
  const Plan plan = plan_run(exp, options, registry);
  const int world_size = spec.nnodes * spec.nproc;
  check_distributed_setup(plan.points, plan.device, world_size, spec.nproc, options.backend, registry);
  // A pool's multi-process point (--worker-of) runs only that point on these ranks.
  if (options.worker_of.empty()) check_point_processes(exp, plan.points, PoolSpec{}, world_size);
  // Node 0's rank 0 makes the run directory; another node's launcher may start after it did.
  if (spec.node_rank == 0 && !options.out.empty() && std::filesystem::exists(options.out / "results.jsonl"))
    throw ConfigError("--out " + options.out.string() + ": already holds results.jsonl; choose a new directory");
  if (options.dry_run) {
    print_plan(exp, plan);
    return 0;
  }
  const int code = supervise_ranks(spec);
  // The rendezvous store's server thread must not race static destructors at exit.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
}

}  // namespace runner
