// Checks an experiment's `report:` section against what its points will record,
// before anything runs: parts named by tables exist, row/pivot/where/key names are
// parameters or declared labels of the tasks, metrics are declared by the task or
// one of its profilers. Errors are ConfigErrors with file:line:col and a hint.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "config/sweep.hpp"

namespace runner {

class PluginRegistry;

// Checks the names the experiment's reports look records up by (parsed with the
// experiment, ExperimentSpec::report_readers) against the expanded points; does
// nothing when the experiment has no report.
void validate_report(const ExperimentSpec& exp, const std::vector<Point>& points, const PluginRegistry& registry);

// The metrics the records of `task` run with `params` may carry: the task's own and
// those its nested plugins add (a ddp strategy's report()), as their manifests
// declare them; nullopt when the task declares none (then nothing is checked).
std::optional<std::set<std::string>> declared_metrics(const std::string& task, const Params& params,
                                                      const PluginRegistry& registry);

// A manifest's `metrics` entry: "name" (every point records it), "name?" (some points
// do, by device or measure settings) or "name if key=a|b and key!=c" (every point whose
// options match; `key` an option of the task, dotted for a nested plugin's, its value
// as written, "key!=" meaning not empty). The name alone:
std::string declared_metric_name(const std::string& entry);

// Of the task's own declared metrics, those every point run with `params` records; a
// point whose records lack one is invalid. Empty when the task declares none. Throws
// std::invalid_argument naming the task and entry when an entry does not parse or names
// an option the task does not have.
std::vector<std::string> required_metrics(const std::string& task, const Params& params,
                                          const PluginRegistry& registry);
// The same from options as a record keeps them (dotted key -> value as text).
std::vector<std::string> required_metrics(const std::string& task, const std::map<std::string, std::string>& options,
                                          const PluginRegistry& registry);

}  // namespace runner
