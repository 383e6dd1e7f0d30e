// Memory profiler: per point, the caching allocator's history on CUDA.
//
// point_begin resets the peak counters and starts allocator history recording
// (optionally with C++ stacks). Every runner range push/pop sets the allocator's
// user metadata to the current range path, so each trace entry says where it was
// made ("measure/step_0/backward"). The metadata lives on the device allocator,
// not the thread, so allocations made by autograd's device thread during backward
// carry the path the main thread set.
//
// point_end writes memory_snapshot.pickle (opens in https://pytorch.org/memory_viz),
// active_memory.svg (active bytes over time with phase bands) and
// largest_allocations.csv, adds peak and largest-allocation metrics, and stops
// recording. On CPU it only records a note: LibTorch keeps no CPU allocator history.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "memory_trace.hpp"
#include "runner/device.hpp"
#include "runner/outcome.hpp"
#include "runner/profiler.hpp"
#include "svg_chart.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#include <torch/csrc/profiler/combined_traceback.h>
#endif

namespace plugins::memory_profiler {
namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
// The allocator's clock after snapshot(): TraceEntry::time_.t_ is microseconds
// since the epoch (converted from TSC ticks; the snapshot's "time_us").
double now_us_since_epoch() {
  return std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("memory profiler: cannot write " + path.string());
}

std::string relative_to_run(const runner::Context& ctx, const std::filesystem::path& path) {
  return ctx.run_dir.empty() ? path.string() : path.lexically_relative(ctx.run_dir).string();
}

bool under_range(const std::string& where, const std::string& prefix) {
  const std::string path = without_repetition(where);
  return path == prefix || path.rfind(prefix + "/", 0) == 0;
}

std::string gib_text(double bytes) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << bytes / kBytesPerGiB;
  return s.str();
}

#ifdef RUNNER_WITH_CUDA
std::shared_ptr<c10::GatheredContext> gather_cpp_stack() {
  return torch::CapturedTraceback::gather(/*python=*/false, /*script=*/false, /*cpp=*/true);
}
#endif

struct Options {
  bool cpp_stacks = false;
  std::int64_t max_entries = 0;
  std::size_t top_k = 10;
  bool group_numbered_ranges = true;
  int phase_depth = 3;
  std::string plot_from;
  std::size_t max_plot_points = 4000;
  std::string figure_dir, figure_prefix;
};

class MemoryProfiler : public runner::Profiler {
 public:
  explicit MemoryProfiler(Options o) : o_(std::move(o)) {}
  ~MemoryProfiler() override { stop_recording(); }

  void point_begin(runner::Context& ctx) override {
    // Without CUDA there is no allocator history: the point says so instead of a
    // table of empty cells.
    if (!ctx.is_cuda())
      throw runner::SkipPoint("memory profiler: needs CUDA (it records the CUDA caching allocator's history); "
                              "skipped on " + ctx.device.str());
#ifdef RUNNER_WITH_CUDA
    device_ = ctx.device.index() < 0 ? 0 : ctx.device.index();
    // The caching allocator creates its per-device state on CUDA's lazy init; before
    // that, recordHistory would reach no device (and resetPeakStats would throw).
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    ctx.synchronize();
    runner::reset_peak_memory(ctx.device);
    using c10::cuda::CUDACachingAllocator::RecordContext;
    c10::cuda::CUDACachingAllocator::recordHistory(
        /*enabled=*/true, o_.cpp_stacks ? &gather_cpp_stack : nullptr, static_cast<size_t>(o_.max_entries),
        o_.cpp_stacks ? RecordContext::ALL : RecordContext::NEVER, /*clearHistory=*/true, /*skip_actions=*/{});
    c10::cuda::CUDACachingAllocator::setUserMetadata(runner::current_range_path());
    marks_.clear();
    recording_ = true;
    mark(runner::current_range_path());
#endif
  }

  void range_push(const std::string&) override {
    tag(runner::current_range_path());
    mark(runner::current_range_path());
  }

  // The host pops its own path after notifying listeners: strip the closing name.
  void range_pop(const std::string& name) override {
    if (!recording_) return;
    std::string path = runner::current_range_path();
    if (path.size() >= name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0)
      path.resize(path.size() - name.size());
    if (!path.empty() && path.back() == '/') path.pop_back();
    tag(path);
    mark(path);
  }

  void point_end(runner::Context& ctx, runner::Record& summary) override {
    if (!ctx.is_cuda()) {
      summary.add_text("memory_profiler", "cpu: no allocator history");
      return;
    }
#ifdef RUNNER_WITH_CUDA
    std::string pickled;
    c10::cuda::CUDACachingAllocator::SnapshotInfo snapshot;
    try {
      ctx.synchronize();
      pickled = torch::cuda::_memory_snapshot_pickled();
      snapshot = c10::cuda::CUDACachingAllocator::snapshot();
    } catch (...) {
      stop_recording();
      throw;
    }
    stop_recording();

    const auto snapshot_path = ctx.artifact_path("memory_snapshot.pickle");
    write_file(snapshot_path, pickled);
    summary.artifacts.push_back(relative_to_run(ctx, snapshot_path));

    std::int64_t active_at_end = 0;
    for (const auto& segment : snapshot.segments) {
      if (segment.device != device_) continue;
      for (const auto& block : segment.blocks)
        if (block.allocated) active_at_end += static_cast<std::int64_t>(block.size);
    }
    std::vector<TraceEvent> events;
    if (static_cast<std::size_t>(device_) < snapshot.device_traces.size()) {
      const auto& trace = snapshot.device_traces[static_cast<std::size_t>(device_)];
      const double t0 = trace.empty() ? 0.0 : static_cast<double>(trace.front().time_.t_);
      using Action = c10::CachingDeviceAllocator::TraceEntry::Action;
      for (const auto& entry : trace) {
        const auto kind = entry.action_ == Action::ALLOC           ? TraceEvent::Kind::alloc
                          : entry.action_ == Action::FREE_COMPLETED ? TraceEvent::Kind::free
                                                                    : TraceEvent::Kind::other;
        TraceEvent e = make_event(kind, static_cast<std::int64_t>(entry.size_), static_cast<double>(entry.time_.t_),
                                  t0, entry.user_metadata_, marks_);
        events.push_back(std::move(e));
      }
    }
    add_results(ctx, summary, events, active_at_end);
#endif
  }

 private:
  void tag(const std::string& path) {
#ifdef RUNNER_WITH_CUDA
    if (recording_) c10::cuda::CUDACachingAllocator::setUserMetadata(path);
#else
    (void)path;
#endif
  }

  void mark(const std::string& path) {
    if (recording_) marks_.push_back({now_us_since_epoch(), path});
  }

  void stop_recording() {
#ifdef RUNNER_WITH_CUDA
    if (!recording_) return;
    recording_ = false;
    c10::cuda::CUDACachingAllocator::setUserMetadata("");
    c10::cuda::CUDACachingAllocator::recordHistory(false, nullptr, /*alloc_trace_max_entries=*/1,
                                                   c10::cuda::CUDACachingAllocator::RecordContext::NEVER,
                                                   /*clearHistory=*/true, {});
#endif
  }

  void add_results(runner::Context& ctx, runner::Record& summary, const std::vector<TraceEvent>& events,
                   std::int64_t active_at_end) {
    if (const auto memory = runner::device_memory(ctx.device)) {
      summary.add("peak_allocated_bytes", static_cast<double>(memory->peak_allocated_bytes), "bytes");
      summary.add("peak_allocated_gib", static_cast<double>(memory->peak_allocated_bytes) / kBytesPerGiB, "GiB");
    }
    const Timeline timeline = active_memory(events, active_at_end);
    summary.add("timeline_peak_bytes", timeline.peak_bytes, "bytes");
    summary.add_text("peak_where", timeline.peak_where.empty() ? "(outside any range)" : timeline.peak_where);
    summary.add("trace_events", static_cast<double>(events.size()), "");

    const auto top = largest_allocations(events, o_.top_k, o_.group_numbered_ranges);
    const auto csv_path = ctx.artifact_path("largest_allocations.csv");
    std::ostringstream csv;
    csv << "rank,bytes,mib,count,where,first_time_ms\n";
    for (std::size_t i = 0; i < top.size(); ++i) {
      csv << i + 1 << "," << top[i].bytes << "," << static_cast<double>(top[i].bytes) / kBytesPerMiB << ","
          << top[i].count << "," << csv_field(top[i].where.empty() ? "(outside any range)" : top[i].where) << ","
          << top[i].first_time_ms << "\n";
    }
    write_file(csv_path, csv.str());
    summary.artifacts.push_back(relative_to_run(ctx, csv_path));
    if (!top.empty()) {
      summary.add("largest_allocation_bytes", static_cast<double>(top[0].bytes), "bytes");
      summary.add("largest_allocation_mib", static_cast<double>(top[0].bytes) / kBytesPerMiB, "MiB");
      summary.add("largest_allocation_count", static_cast<double>(top[0].count), "");
      summary.add_text("largest_allocation_where", top[0].where.empty() ? "(outside any range)" : top[0].where);
    }

    const std::string svg = render_svg(chart(ctx, events, timeline));
    const auto svg_path = ctx.artifact_path("active_memory.svg");
    write_file(svg_path, svg);
    summary.artifacts.push_back(relative_to_run(ctx, svg_path));
    if (!o_.figure_dir.empty()) {
      std::filesystem::create_directories(o_.figure_dir);
      const auto figure = std::filesystem::path(o_.figure_dir) / (o_.figure_prefix + ctx.point_name + ".svg");
      write_file(figure, svg);
      summary.add_text("active_memory_figure", figure.string());
    }
  }

  LineChart chart(const runner::Context& ctx, const std::vector<TraceEvent>& events, const Timeline& t) const {
    LineChart c;
    std::size_t first = 0;
    if (!o_.plot_from.empty()) {
      while (first < t.time_ms.size() && !under_range(events[t.event_index[first]].where, o_.plot_from)) ++first;
      if (first == t.time_ms.size()) first = 0;  // never entered: show everything
    }
    const bool has_time = !t.time_ms.empty() && t.time_ms.back() > t.time_ms[first];
    for (std::size_t i = first; i < t.time_ms.size(); ++i) {
      c.x.push_back(has_time ? t.time_ms[i] : static_cast<double>(i));
      c.y.push_back(t.active_bytes[i] / kBytesPerGiB);
    }
    if (has_time) c.bands = [&] {
      std::vector<ChartBand> bands;
      for (const PhaseSpan& s : phase_spans(events, o_.phase_depth)) bands.push_back({s.begin_ms, s.end_ms, s.label});
      return bands;
    }();
    downsample_min_max(c.x, c.y, o_.max_plot_points);
    c.title = "Active memory, " + ctx.point_name + " (" + ctx.precision.name + "): peak " + gib_text(t.peak_bytes) +
              " GiB";
    c.x_label = has_time ? "time since profiling began (ms)" : "allocator event";
    c.y_label = "active memory (GiB)";
    return c;
  }

  Options o_;
  std::vector<RangeMark> marks_;  // when the main thread entered each range path
  bool recording_ = false;
  c10::DeviceIndex device_ = 0;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Profiler;
  m.name = "memory";
  m.version = "1";
  m.description = "CUDA allocator history per point: snapshot for memory_viz, active-memory SVG, largest allocations";
  m.options = {
      runner::opt_enum("stacks", {"none", "cpp"}, "none", "record C++ stacks with each allocation (slow; shows in memory_viz)"),
      runner::opt_int("max_entries", 1000000, "allocator trace ring-buffer size").in_range(1, 1e9),
      runner::opt_int("top_k", 10, "rows of largest_allocations.csv").in_range(1, 1e6),
      runner::opt_bool("group_numbered_ranges", true, "group step_3/layer12 as step_*/layer* in the largest allocations"),
      runner::opt_int("phase_depth", 3, "range depth of the chart's bands (3: warmup|measure/step_i/<phase>)").in_range(1, 64),
      runner::opt_string("plot_from", "", "chart starts at the first allocation inside this range path (e.g. measure)"),
      runner::opt_int("max_plot_points", 4000, "the chart keeps per-bucket min/max beyond this many points").in_range(2, 1e7),
      runner::opt_string("figure_dir", "", "also write the chart to <figure_dir>/<figure_prefix><point name>.svg"),
      runner::opt_string("figure_prefix", "active_memory-", "file name prefix for figure_dir copies"),
  };
  m.metrics = std::vector<std::string>{
      "memory_profiler", "peak_allocated_bytes", "peak_allocated_gib", "timeline_peak_bytes", "peak_where",
      "trace_events", "largest_allocation_bytes", "largest_allocation_mib", "largest_allocation_count",
      "largest_allocation_where", "active_memory_figure"};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    Options o;
    o.cpp_stacks = p.text("stacks") == "cpp";
    o.max_entries = p.integer("max_entries");
    o.top_k = static_cast<std::size_t>(std::max<std::int64_t>(0, p.integer("top_k")));
    o.group_numbered_ranges = p.flag("group_numbered_ranges");
    o.phase_depth = static_cast<int>(p.integer("phase_depth"));
    o.plot_from = p.text("plot_from");
    o.max_plot_points = static_cast<std::size_t>(std::max<std::int64_t>(2, p.integer("max_plot_points")));
    o.figure_dir = p.text("figure_dir");
    o.figure_prefix = p.text("figure_prefix");
    if (o.max_entries < 1) throw std::invalid_argument("memory profiler: max_entries must be >= 1");
    // Figures land under the working directory only, named by a plain prefix.
    const std::filesystem::path figure_dir(o.figure_dir);
    if (figure_dir.is_absolute() ||
        std::any_of(figure_dir.begin(), figure_dir.end(), [](const auto& part) { return part == ".."; }))
      throw std::invalid_argument("memory profiler: figure_dir '" + o.figure_dir +
                                  "' must be a relative path without '..'");
    if (o.figure_prefix.find('/') != std::string::npos || o.figure_prefix.find("..") != std::string::npos)
      throw std::invalid_argument("memory profiler: figure_prefix '" + o.figure_prefix +
                                  "' must not contain '/' or '..'");
    return std::make_unique<MemoryProfiler>(std::move(o));
  };
  return m;
}

}  // namespace
}  // namespace plugins::memory_profiler

RUNNER_PLUGIN(plugins::memory_profiler::make_manifest)
