// profiler/kernels: where a point's GPU time goes, kernel by kernel and phase by
// phase, from LibTorch's own profiler (Kineto; CUPTI on CUDA) instead of Nsight.
//
// Profiling starts when the `measure` range opens (warm-up steps run unprofiled:
// first-call costs stay out, and they give the unprofiled step time the cost is
// stated against) and stops when it closes. Every runner range seen meanwhile is
// also opened as a profiler user scope, so the Chrome trace shows
// measure/step_i/forward/layer3/attention/attention/softmax around the kernels,
// and each kernel is attributed through its launching op to the innermost
// ranges: on the launching thread, and for autograd's backward threads the
// home thread's step and phase at that moment.
//
// Point end: the trace goes to the point's artifacts (trace.json, for Perfetto
// and chrome://tracing) and the profiler adds its own records: per phase a
// kernel table, a phase summary (classes by kernel_classes.yaml), attention's
// scores/softmax/weighted-sum times beside their FLOPs, and the profiler's cost.
// On a CPU the "kernels" are the aten ops, each with its self time.
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "kernel_table.hpp"
#include "runner/context.hpp"
#include "runner/profiler.hpp"
#include "runner/record.hpp"

namespace plugins::kernels {

extern const char* const kDefaultRules;  // kernel_classes.yaml, embedded at build time

namespace {

namespace prof = torch::profiler::impl;
using Clock = std::chrono::steady_clock;

// libkineto::ActivityType values as KinetoEvent::activityType() reports them.
constexpr std::uint8_t kCpuOp = 0, kUserAnnotation = 1, kGpuMemcpy = 3, kGpuMemset = 4, kKernel = 5;

struct Options {
  bool trace = true, tables = true, shapes = true;
  std::int64_t top_k = 20;
  std::string rules_file;
};

// A runner range mirrored as a profiler user scope; RecordFunction keeps a view
// of the name, so the name lives beside it.
struct UserScope {
  explicit UserScope(std::string n) : name(std::move(n)), scope(at::RecordScope::USER_SCOPE) {
    if (scope.isActive()) scope.before(std::string_view(name));
  }
  std::string name;
  at::RecordFunction scope;
};
thread_local std::vector<std::unique_ptr<UserScope>> open_scopes;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("profiler kernels: rules: cannot read '" + path.string() + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class KernelProfiler : public runner::Profiler {
 public:
  KernelProfiler(Options o, ClassRules rules) : o_(std::move(o)), rules_(std::move(rules)) {}

  void point_begin(runner::Context& ctx) override {
    ctx_ = &ctx;
    home_ = std::this_thread::get_id();
    home_id_ = at::RecordFunction::currentThreadId();
    activities_ = {prof::ActivityType::CPU};
    if (ctx.is_cuda()) activities_.insert(prof::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config(), activities_);
  }

  void range_push(const std::string& name) override {
    const bool home = std::this_thread::get_id() == home_;
    if (home) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (name == "warmup") in_warmup_ = true;
      if (name == "measure" && !active_ && !done_) {
        torch::autograd::profiler::enableProfiler(config(), activities_);
        active_ = true;
      }
      if (name.rfind("step_", 0) == 0) step_start_ = Clock::now();
    }
    if (active_) open_scopes.push_back(std::make_unique<UserScope>(name));
  }

  void range_pop(const std::string& name) override {
    if (!open_scopes.empty() && open_scopes.back()->name == name) open_scopes.pop_back();
    if (std::this_thread::get_id() != home_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (name.rfind("step_", 0) == 0) (active_ ? profiled_wall_ms_ : in_warmup_ ? warmup_wall_ms_ : ignored_).push_back(ms_since(step_start_));
    if (name == "warmup") in_warmup_ = false;
    if (name == "measure" && active_) stop();
  }

  void point_end(runner::Context& ctx, runner::Record& summary) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (active_) stop();
      // A point that failed before its measured steps (an OOM in warm-up, say) leaves
      // Kineto prepared but never started, and the next point's disableProfiler then
      // fails ("not running"). Start and stop it once, discarding the empty result.
      if (!done_) {
        torch::autograd::profiler::enableProfiler(config(), activities_);
        torch::autograd::profiler::disableProfiler();
        done_ = true;
      }
    }
    if (!result_) return;
    const auto start = Clock::now();
    if (o_.trace) {
      const std::filesystem::path file = ctx.artifact_path("trace.json");
      result_->save(file.string());
      trace_bytes_ = static_cast<double>(std::filesystem::file_size(file));
      summary.artifacts.push_back(ctx.run_dir.empty() ? file.string()
                                                      : file.lexically_relative(ctx.run_dir).string());
    }
    if (o_.tables) collect(*result_, ctx.is_cuda());
    events_ = static_cast<double>(result_->events().size());
    result_.reset();
    processing_ms_ = ms_since(start);
  }

  void emit_records(runner::Context&, const std::vector<runner::Record>& task_records, runner::Recorder& out) override {
    if (!o_.tables || breakdown_.steps == 0) return;
    const double steps = breakdown_.steps;
    for (const PhaseTable& t : breakdown_.tables) {
      emit_phase(t, task_records, steps, out);
      for (std::size_t i = 0; i < t.rows.size() && static_cast<std::int64_t>(i) < o_.top_k; ++i) {
        const KernelRow& row = t.rows[i];
        runner::Record r;
        r.label("table", "kernels").label("phase", t.phase).label("position", std::to_string(i + 1));
        r.label("kernel", row.short_name).label("class", row.kernel_class);
        r.add("calls", row.calls / steps, "calls/step");
        r.add("total_ms", row.total_ns / steps / 1e6, "ms/step");
        r.add("mean_us", row.total_ns / row.calls / 1e3, "us");
        r.add("share", t.total_ns > 0 ? 100.0 * row.total_ns / t.total_ns : 0.0, "%");
        r.add_text("kernel_name", row.full_name);
        out.emit(std::move(r));
      }
    }
    for (const std::string phase : {"forward", "backward"}) emit_attention(phase, steps, out);
    emit_cost(task_records, out);
  }

 private:
  prof::ProfilerConfig config() const {
    return prof::ProfilerConfig(prof::ProfilerState::KINETO, /*report_input_shapes=*/o_.shapes,
                                /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/o_.shapes);
  }

  void stop() {
    if (ctx_ != nullptr) ctx_->synchronize();  // the last step's kernels belong in the trace
    result_ = torch::autograd::profiler::disableProfiler();
    active_ = false;
    done_ = true;
  }

  void collect(const torch::autograd::profiler::ProfilerResult& result, bool device_kernels) {
    std::vector<Span> spans;
    std::vector<Activity> activities;
    std::vector<OpInfo> ops;
    struct Launch {
      std::uint64_t thread;
      std::int64_t ns;
    };
    std::unordered_map<std::uint64_t, Launch> launch_of;  // CPU op correlation id -> where it ran
    for (const auto& e : result.events()) {
      const auto type = e.activityType();
      const auto start = static_cast<std::int64_t>(e.startNs()), end = static_cast<std::int64_t>(e.endNs());
      if (type == kUserAnnotation) {
        spans.push_back({e.name(), e.startThreadId(), start, end});
      } else if (type == kCpuOp) {
        launch_of[e.correlationId()] = {e.startThreadId(), start};
        OpInfo op{e.name(), e.startThreadId(), start, static_cast<double>(e.flops()), 0};
        if (e.hasShapes() && !e.shapes().empty() && !e.shapes()[0].empty()) {
          op.numel = 1;
          for (const auto d : e.shapes()[0]) op.numel *= d;
        }
        ops.push_back(std::move(op));
        if (!device_kernels) activities.push_back({e.name(), start, end - start, e.startThreadId(), start});
      } else if (device_kernels && (type == kKernel || type == kGpuMemcpy || type == kGpuMemset)) {
        activities.push_back({e.name(), start, static_cast<std::int64_t>(e.durationNs()), home_id_, start});
        link_.push_back({activities.size() - 1, e.linkedCorrelationId()});
      }
    }
    for (const auto& [index, corr] : link_) {
      const auto it = launch_of.find(corr);
      if (it == launch_of.end()) continue;  // no launching op: placed by its own start on the home thread
      activities[index].launch_thread = it->second.thread;
      activities[index].launch_ns = it->second.ns;
    }
    link_.clear();
    if (!device_kernels) activities = self_times(activities);
    breakdown_ = build_breakdown(activities, spans, home_id_, rules_, "measure");
    for (const std::string phase : {"forward", "backward"})
      flops_[phase] = attention_flops(ops, spans, home_id_, "measure", phase, breakdown_.steps);
  }

  // CPU ops nest (aten::linear > aten::addmm > aten::copy_): each op's own work is
  // its self time, its duration less that of the ops directly inside it.
  static std::vector<Activity> self_times(std::vector<Activity> ops) {
    std::sort(ops.begin(), ops.end(), [](const Activity& a, const Activity& b) {
      if (a.launch_thread != b.launch_thread) return a.launch_thread < b.launch_thread;
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      return a.dur_ns > b.dur_ns;
    });
    std::vector<std::int64_t> self(ops.size());
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      self[i] = ops[i].dur_ns;
      while (!open.empty() && (ops[open.back()].launch_thread != ops[i].launch_thread ||
                               ops[open.back()].start_ns + ops[open.back()].dur_ns <= ops[i].start_ns))
        open.pop_back();
      if (!open.empty()) self[open.back()] -= ops[i].dur_ns;
      open.push_back(i);
    }
    for (std::size_t i = 0; i < ops.size(); ++i) ops[i].dur_ns = std::max<std::int64_t>(0, self[i]);
    return ops;
  }

  static const runner::Metric* task_metric(const std::vector<runner::Record>& records, const std::string& name) {
    for (const auto& r : records)
      if (const runner::Metric* m = r.find(name)) return m;
    return nullptr;
  }

  static double mean_of(const runner::Metric& m) {
    if (const auto* s = std::get_if<runner::Stats>(&m.value)) return s->mean;
    if (const auto* d = std::get_if<double>(&m.value)) return *d;
    return 0;
  }

  void emit_phase(const PhaseTable& t, const std::vector<runner::Record>& task_records, double steps,
                  runner::Recorder& out) const {
    runner::Record r;
    r.label("table", "phases").label("phase", t.phase);
    const double kernel_ms = t.total_ns / steps / 1e6;
    r.add("kernel_ms", kernel_ms, "ms/step");
    double calls = 0;
    for (const auto& row : t.rows) calls += row.calls;
    r.add("kernels_per_step", calls / steps, "calls/step");
    r.add("distinct_kernels", static_cast<double>(t.rows.size()), "");
    for (const std::string& c : rules_.classes()) {
      const auto it = t.class_ns.find(c);
      const double ns = it != t.class_ns.end() ? it->second : 0.0;
      const auto calls_it = t.class_calls.find(c);
      r.add("share_" + c, t.total_ns > 0 ? 100.0 * ns / t.total_ns : 0.0, "%");
      r.add(c + "_kernel_ms", ns / steps / 1e6, "ms/step");
      r.add(c + "_kernels", calls_it != t.class_calls.end() ? calls_it->second / steps : 0.0, "calls/step");
    }
    if (!t.rows.empty()) {
      r.add_text("top_kernel", t.rows.front().short_name);
      r.add_text("top_kernel_class", t.rows.front().kernel_class);
      r.add("top_kernel_calls", t.rows.front().calls / steps, "calls/step");
      r.add("top_kernel_share", t.total_ns > 0 ? 100.0 * t.rows.front().total_ns / t.total_ns : 0.0, "%");
    }
    // (a): the kernels' summed time against the runner's own timer of that phase.
    if (const runner::Metric* m = task_metric(task_records, t.phase + "_ms")) {
      const double phase_ms = mean_of(*m);
      r.add("timer_ms", phase_ms, "ms");
      if (phase_ms > 0) r.add("kernel_vs_timer", 100.0 * kernel_ms / phase_ms, "%");
    }
    const auto span = breakdown_.span_ns.find(t.phase);
    if (span != breakdown_.span_ns.end()) r.add("host_range_ms", span->second / steps / 1e6, "ms/step");
    out.emit(std::move(r));
  }

  void emit_attention(const std::string& phase, double steps, runner::Recorder& out) const {
    const PhaseTable* scores = breakdown_.find(phase + "/attention/scores");
    const PhaseTable* softmax = breakdown_.find(phase + "/attention/softmax");
    const PhaseTable* weighted = breakdown_.find(phase + "/attention/weighted_sum");
    if (scores == nullptr || softmax == nullptr || weighted == nullptr) return;
    const auto matmul_ns = [](const PhaseTable* t) {
      const auto it = t->class_ns.find("matmul");
      return it == t->class_ns.end() ? 0.0 : it->second;
    };
    const double matmul_ms = (matmul_ns(scores) + matmul_ns(weighted)) / steps / 1e6;
    const double softmax_ms = softmax->total_ns / steps / 1e6;
    runner::Record r;
    r.label("table", "attention").label("phase", phase);
    r.add("scores_ms", scores->total_ns / steps / 1e6, "ms/step");
    r.add("softmax_ms", softmax_ms, "ms/step");
    r.add("weighted_sum_ms", weighted->total_ns / steps / 1e6, "ms/step");
    r.add("attention_matmul_ms", matmul_ms, "ms/step");
    if (matmul_ms > 0) r.add("softmax_vs_matmul_time", softmax_ms / matmul_ms, "ratio");
    const auto f = flops_.find(phase);
    if (f != flops_.end() && f->second.matmul > 0) {
      r.add("attention_matmul_gflop", f->second.matmul / 1e9, "GFLOP/step");
      r.add("softmax_gflop", f->second.softmax / 1e9, "GFLOP/step");
      r.add("softmax_vs_matmul_flop", f->second.softmax / f->second.matmul, "ratio");
    }
    out.emit(std::move(r));
  }

  void emit_cost(const std::vector<runner::Record>& task_records, runner::Recorder& out) const {
    runner::Record r;
    r.label("table", "cost");
    // Host wall time of whole steps (synchronized with sync_each_step): warm-up steps
    // after the first run unprofiled, the measured ones profiled, in the same point.
    std::vector<double> unprofiled(warmup_wall_ms_.begin() + std::min<std::size_t>(1, warmup_wall_ms_.size()),
                                   warmup_wall_ms_.end());
    if (!unprofiled.empty()) r.add("unprofiled_wall_ms", median(unprofiled), "ms");
    if (!profiled_wall_ms_.empty()) r.add("profiled_wall_ms", median(profiled_wall_ms_), "ms");
    if (!unprofiled.empty() && !profiled_wall_ms_.empty() && median(unprofiled) > 0)
      r.add("profiler_overhead", 100.0 * (median(profiled_wall_ms_) / median(unprofiled) - 1.0), "%");
    if (const runner::Metric* m = task_metric(task_records, "step_ms")) r.add("profiled_step_ms", mean_of(*m), "ms");
    r.add("profiled_steps", static_cast<double>(breakdown_.steps), "steps");
    r.add("trace_events", events_, "events");
    if (o_.trace) r.add("trace_mib", trace_bytes_ / (1024.0 * 1024.0), "MiB");
    r.add("processing_ms", processing_ms_, "ms");
    out.emit(std::move(r));
  }

  Options o_;
  ClassRules rules_;
  runner::Context* ctx_ = nullptr;
  std::thread::id home_;
  std::uint64_t home_id_ = 0;
  std::set<prof::ActivityType> activities_;
  std::mutex mutex_;
  std::atomic<bool> active_{false};  // read by range callbacks on every thread
  bool done_ = false, in_warmup_ = false;
  Clock::time_point step_start_{};
  std::vector<double> warmup_wall_ms_, profiled_wall_ms_, ignored_;
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result_;
  std::vector<std::pair<std::size_t, std::uint64_t>> link_;
  Breakdown breakdown_;
  std::map<std::string, AttentionFlops> flops_;
  double trace_bytes_ = 0, events_ = 0, processing_ms_ = 0;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Profiler;
  m.name = "kernels";
  m.version = "1";
  m.description = "Kineto profile of the measured steps: Chrome trace, per-phase kernel tables, classes, cost";
  m.options = {
      runner::opt_bool("trace", true, "write the Chrome trace of the measured steps (artifact trace.json)"),
      runner::opt_bool("tables", true, "add the per-phase kernel, phase, attention and cost records"),
      runner::opt_int("top_k", 20, "kernel rows per phase (by total time)").in_range(1, 1e6),
      runner::opt_bool("shapes", true, "record input shapes and FLOPs (attention FLOP ratio; costs host time)"),
      runner::opt_string("rules", "", "kernel class rules file (YAML); empty: the plugin's kernel_classes.yaml"),
  };
  std::vector<std::string> metrics = {
      "calls", "total_ms", "mean_us", "share", "kernel_name", "kernel_ms", "kernels_per_step", "distinct_kernels",
      "top_kernel", "top_kernel_class", "top_kernel_calls", "top_kernel_share", "timer_ms", "kernel_vs_timer",
      "host_range_ms", "scores_ms", "softmax_ms", "weighted_sum_ms", "attention_matmul_ms",
      "softmax_vs_matmul_time", "attention_matmul_gflop", "softmax_gflop", "softmax_vs_matmul_flop",
      "unprofiled_wall_ms", "profiled_wall_ms", "profiler_overhead", "profiled_step_ms", "profiled_steps",
      "trace_events", "trace_mib", "processing_ms"};
  for (const std::string& c : ClassRules::class_names())
    for (const std::string& metric : {"share_" + c, c + "_kernel_ms", c + "_kernels"}) metrics.push_back(metric);
  m.metrics = std::move(metrics);
  m.labels = std::vector<std::string>{"table", "phase", "position", "kernel", "class"};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    Options o;
    o.trace = p.flag("trace");
    o.tables = p.flag("tables");
    o.top_k = p.integer("top_k");
    o.shapes = p.flag("shapes");
    o.rules_file = p.text("rules");
    ClassRules rules = o.rules_file.empty() ? ClassRules::parse(kDefaultRules, "profiler kernels: kernel_classes.yaml")
                                            : ClassRules::parse(read_file(o.rules_file), o.rules_file);
    return std::make_unique<KernelProfiler>(std::move(o), std::move(rules));
  };
  return m;
}

}  // namespace
}  // namespace plugins::kernels

RUNNER_PLUGIN(plugins::kernels::make_manifest)
