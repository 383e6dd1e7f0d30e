// Checks an experiment's `report:` section against what its points will record,
// before anything runs: parts named by tables exist, row/pivot/where/key names are
// parameters or declared labels of the tasks, metrics are declared by the task or
// one of its profilers. Errors are ConfigErrors with file:line:col and a hint.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config.hpp"
#include "sweep.hpp"

namespace runner {

class PluginRegistry;

// Parses the spec (a report::SpecError on a malformed one) and checks it against
// the expanded points; does nothing when the experiment has no report.
void validate_report(const Experiment& exp, const std::vector<Point>& points, const PluginRegistry& registry);

// The metrics the records of `task` run with `params` may carry: the task's own and
// those its nested plugins add (a ddp strategy's report()), as their manifests
// declare them; nullopt when the task declares none (then nothing is checked).
std::optional<std::set<std::string>> declared_metrics(const std::string& task, const Params& params,
                                                      const PluginRegistry& registry);

}  // namespace runner
