#include "config/sweep.hpp"

#include <limits>

#include "base/text_distance.hpp"
#include "config/registry.hpp"

namespace runner {
namespace {

const std::vector<OptionSpec>& measure_options() {
  static const std::vector<OptionSpec> options = {
      opt_int("warmup_steps", 5, "untimed steps before measuring").in_range(0, 1e9),
      opt_float("warmup_seconds", 0.0,
                "warm-up also lasts at least this long (an idle GPU's clocks ramp up over tens of ms)")
          .in_range(0, 3600),
      opt_int("measured_steps", 10, "timed steps per repetition (when target_rel_stderr is 0)").in_range(1, 1e9),
      opt_float("target_rel_stderr", 0.0,
                "> 0: measure until the relative standard error of the mean step time is at most this"),
      opt_int("min_steps", 10, "adaptive: at least this many timed steps").in_range(2, 1e9),
      opt_int("max_steps", 1000, "adaptive: at most this many timed steps").in_range(2, 1e9),
      opt_float("max_seconds", 60.0, "adaptive: stop once the timed steps took this long").in_range(0, 1e9),
      opt_int("repetitions", 1, "rerun warm-up + measurement this many times; one mean each").in_range(1, 1e6),
      opt_bool("sync_each_step", true, "synchronize the device after every timed step"),
      opt_bool("hold_stream", false,
               "CUDA, with sync_each_step false: hold the stream while a batch of steps is enqueued, so short "
               "steps' times hold no host launch gaps"),
      opt_enum("cache", {"warm", "cold"}, "warm", "cold: write a buffer larger than L2 before every step"),
      opt_float("timeout_s", kDefaultPointTimeoutS,
                "stop a point that runs longer than this (its child processes too) and record it as timeout")
          .in_range(0.001, 1e9),
  };
  return options;
}

const std::vector<OptionSpec>& point_options() {
  static const std::vector<OptionSpec> options = {
      opt_enum("precision", {"fp32", "tf32", "bf16", "fp16"}, "fp32",
               "fp32, tf32 matmuls, or bf16/fp16 autocast"),
      opt_int("seed", 0, "random seed set before each point").at_least(0),
  };
  return options;
}

void check_measure(const MeasureSettings& m, const YAML::Node& node, const SourceMap& src) {
  const std::string at = src.where(node, "measure") + ": measure: ";
  if (m.warmup_steps < 0 || m.measured_steps < 1)
    throw ConfigError(at + "need warmup_steps >= 0 and measured_steps >= 1");
  if (m.repetitions < 1) throw ConfigError(at + "repetitions must be >= 1");
  if (m.hold_stream && m.sync_each_step)
    throw ConfigError(at + "hold_stream needs sync_each_step: false: a held batch runs only once its last step is "
                      "enqueued, and sync_each_step waits for every step before that");
  if (m.target_rel_stderr < 0 || m.target_rel_stderr >= 1)
    throw ConfigError(at + "target_rel_stderr is a fraction (0.01 = 1%); 0 turns adaptive stopping off");
  if (m.adaptive() && (m.min_steps < 2 || m.max_steps < m.min_steps || m.max_seconds <= 0))
    throw ConfigError(at + "adaptive stopping needs 2 <= min_steps <= max_steps and max_seconds > 0 (got min_steps " +
                      std::to_string(m.min_steps) + ", max_steps " + std::to_string(m.max_steps) + ")");
}

std::string scalar_or_flow(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

std::vector<Params> resolve_profilers(const YAML::Node& list, const PluginRegistry& registry,
                                      const SourceMap& src) {
  std::vector<Params> out;
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) throw ConfigError(src.where(list, "profilers") + ": profilers: expected a list of profiler plugins");
  OptionSpec spec = opt_plugin("profiler", PluginKind::Profiler, Value(), "a profiler");
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node wrapper(YAML::NodeType::Map);
    wrapper["profiler"] = list[i];
    Params p = resolve_options(wrapper, {spec}, registry, "profilers." + std::to_string(i), src);
    out.push_back(p.plugin("profiler"));
  }
  return out;
}

}  // namespace

std::size_t count_points(const ExperimentSpec& exp, bool include_disabled) {
  std::size_t total = 0;
  for (const PartSpec* part : exp.parts_to_run(include_disabled)) {
    const std::size_t n = part->point_count();
    total = n > std::numeric_limits<std::size_t>::max() - total ? std::numeric_limits<std::size_t>::max() : total + n;
  }
  return total;
}

std::vector<Point> expand_points(const ExperimentSpec& exp, const PluginRegistry& registry, std::size_t max_points,
                                 bool include_disabled) {
  // Counted from the axis lengths before anything is expanded: a sweep of 10^7
  // points must be refused in microseconds, not after gigabytes of points.
  if (const std::size_t n = count_points(exp, include_disabled); n > max_points) {
    const std::string count = n == std::numeric_limits<std::size_t>::max() ? "more than 10^19" : std::to_string(n);
    throw ConfigError(exp.source.file + ": sweep: expands to " + count + " points, more than the limit of " +
                      std::to_string(max_points) + "; shrink the axes or raise the limit with --max-points");
  }
  std::vector<Point> points;
  const SourceMap& src = exp.source;
  for (const PartSpec* part : exp.parts_to_run(include_disabled)) {
    const std::string& task = part->task;
    const PluginManifest* manifest = registry.find(PluginKind::Task, task);
    if (manifest == nullptr) {
      throw ConfigError(part->task_where + ": task: no task plugin named '" + task + "'" +
                        suggestion(task, registry.names(PluginKind::Task)) + " (see `runner plugins`)");
    }
    const auto profilers = resolve_profilers(part->profilers, registry, src);
    const std::vector<SweepFactor>& factors = part->sweep;

    std::vector<size_t> counter(factors.size(), 0);
    int index = 0;
    while (true) {
      PathValues param_values, measure_values, point_values;
      Point p;
      for (size_t f = 0; f < factors.size(); ++f) {
        for (const auto& [path, value] : factors[f][counter[f]]) {
          p.axes.emplace_back(path, scalar_or_flow(value));
          if (path.rfind("measure.", 0) == 0) measure_values[path.substr(8)] = value;
          else if (path == "precision" || path == "seed") point_values[path] = value;
          else param_values[path] = value;
        }
      }
      p.part = part->name;
      p.index = index++;
      p.task = task;
      p.params = resolve_options(part->params, manifest->options, registry, "params", src, param_values);
      p.params.set_plugin_name(task);
      const Params m = resolve_options(part->measure, measure_options(), registry, "measure", src, measure_values);
      p.measure.warmup_steps = static_cast<int>(m.integer("warmup_steps"));
      p.measure.warmup_seconds = m.number("warmup_seconds");
      p.measure.measured_steps = static_cast<int>(m.integer("measured_steps"));
      p.measure.sync_each_step = m.flag("sync_each_step");
      p.measure.hold_stream = m.flag("hold_stream");
      p.measure.target_rel_stderr = m.number("target_rel_stderr");
      p.measure.min_steps = static_cast<int>(m.integer("min_steps"));
      p.measure.max_steps = static_cast<int>(m.integer("max_steps"));
      p.measure.max_seconds = m.number("max_seconds");
      p.measure.repetitions = static_cast<int>(m.integer("repetitions"));
      p.measure.cache = m.text("cache");
      p.timeout_s = m.number("timeout_s");
      check_measure(p.measure, part->measure, src);
      const Params pp = resolve_options(part->precision_seed, point_options(), registry, "", src, point_values);
      p.precision = Precision::parse(pp.text("precision"));
      p.seed = static_cast<std::uint64_t>(pp.integer("seed"));
      p.profilers = profilers;
      points.push_back(std::move(p));

      // The last axis varies fastest, like nested loops in declaration order.
      size_t f = factors.size();
      while (f > 0) {
        if (++counter[f - 1] < factors[f - 1].size()) break;
        counter[--f] = 0;
      }
      if (f == 0) break;
    }
  }
  return points;
}

std::size_t parse_max_points(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 12 && text.find_first_not_of("0123456789") == std::string::npos;
  const std::size_t n = digits ? std::stoull(text) : 0;
  if (n < 1 || n > kMaxPointsCeiling)
    throw ConfigError("--max-points " + text + ": expected a whole number from 1 to " +
                      std::to_string(kMaxPointsCeiling) + " (every point is held in memory)");
  return n;
}

void preflight_points(const std::vector<Point>& points, const PluginRegistry& registry) {
  for (const Point& p : points) {
    const PluginManifest* m = registry.find(PluginKind::Task, p.task);
    if (m == nullptr || !m->preflight) continue;
    try {
      m->preflight(p.params);
    } catch (const std::exception& e) {
      throw ConfigError("part " + p.part + ": task " + p.task + ": " + e.what());
    }
  }
}

std::string describe_point(const Point& point) {
  std::string out;
  for (const auto& [k, v] : point.axes) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? "(single point)" : out;
}

}  // namespace runner
