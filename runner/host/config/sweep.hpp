// Sweep expansion: the cartesian product of a part's axes (zip groups pair axes),
// each point resolved and validated against the task's declared options before
// anything runs.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "runner/context.hpp"
#include "runner/measure.hpp"
#include "runner/params.hpp"

namespace runner {

class PluginRegistry;

// Generous: an hour, far past any sane point, short of a run that hangs all night.
inline constexpr double kDefaultPointTimeoutS = 3600;

struct Point {
  std::string part;
  int index = 0;          // within the part
  std::string task;       // task plugin name
  Params params;          // the task's resolved options
  MeasureSettings measure;
  // measure.timeout_s: the point is stopped (status timeout) when it runs longer.
  double timeout_s = kDefaultPointTimeoutS;
  Precision precision;
  std::uint64_t seed = 0;
  std::vector<Params> profilers;
  // Axis path -> value of this point, in axis order (for progress lines).
  std::vector<std::pair<std::string, std::string>> axes;
};

inline constexpr std::size_t kDefaultMaxPoints = 100000;
// --max-points cannot go above this: every point is held in memory (about 10 KiB
// each with its parameters), so a larger sweep would exhaust memory, not run.
inline constexpr std::size_t kMaxPointsCeiling = 1000000;

// Points the sweep of every part makes (product of axis lengths), without
// expanding them; saturates at SIZE_MAX.
std::size_t count_points(const ExperimentSpec& exp, bool include_disabled = false);

// Expands every enabled part of `exp` (with include_disabled, every part). Throws
// ConfigError on any invalid key or value, and when the sweep has more than
// `max_points` points (before expanding any).
std::vector<Point> expand_points(const ExperimentSpec& exp, const PluginRegistry& registry,
                                 std::size_t max_points = kDefaultMaxPoints, bool include_disabled = false);

// --max-points N: a whole number from 1 to kMaxPointsCeiling (ConfigError
// otherwise; "-1" must not wrap to 2^64-1).
std::size_t parse_max_points(const std::string& text);

// Runs each task's preflight check on every point (before the sweep, not on
// --dry-run); a failure is a ConfigError naming the part and task.
void preflight_points(const std::vector<Point>& points, const PluginRegistry& registry);

// "model.size=small precision=bf16"
std::string describe_point(const Point& point);

}  // namespace runner
