#include "config/report_spec_check.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "base/text_distance.hpp"
#include "config/registry.hpp"
#include "report/report.hpp"

namespace runner {
namespace {

// What the records of a set of points can be looked up by.
struct Vocabulary {
  std::set<std::string> keys;     // params (dotted) and labels
  std::set<std::string> metrics;
  bool labels_known = true;       // every task declared its labels
  bool metrics_known = true;      // every task and profiler declared its metrics
};

// Metrics that the nested plugins of `params` add to their task's records.
void add_nested_metrics(const Params& params, const PluginManifest& manifest, const PluginRegistry& registry,
                        std::set<std::string>& metrics) {
  for (const OptionSpec& option : manifest.options) {
    if (option.type != OptionType::Plugin || !params.has(option.name)) continue;
    const Params& nested = params.plugin(option.name);
    const PluginManifest* m = registry.find(option.plugin_kind, nested.plugin_name());
    if (m == nullptr) continue;
    if (m->metrics)
      for (const std::string& entry : *m->metrics) metrics.insert(declared_metric_name(entry));
    add_nested_metrics(nested, *m, registry, metrics);
  }
}

// "<prefix><option>" for every option of the plugins that may fill the nested plugin
// options of `options` (any attention plugin's options for a task's `attention`), so
// a key such as attention.kernel stays valid where the points at hand (a --smoke
// sweep, say) use another plugin of that kind.
void add_nested_option_keys(const std::vector<OptionSpec>& options, const std::string& prefix,
                            const PluginRegistry& registry, int depth, std::set<std::string>& keys) {
  if (depth > 3) return;
  for (const OptionSpec& option : options) {
    if (option.type != OptionType::Plugin) continue;
    for (const auto& plugin : registry.plugins()) {
      if (plugin.manifest->kind != option.plugin_kind) continue;
      for (const OptionSpec& nested : plugin.manifest->options) keys.insert(prefix + option.name + "." + nested.name);
      add_nested_option_keys(plugin.manifest->options, prefix + option.name + ".", registry, depth + 1, keys);
    }
  }
}

Vocabulary vocabulary_of(const std::vector<const Point*>& points, const PluginRegistry& registry) {
  Vocabulary v;
  std::set<std::string> seen_tasks, seen_profilers;
  for (const Point* p : points) {
    for (const auto& [key, value] : p->params.flatten()) v.keys.insert(key);
    // The host's keys; "rank" labels each rank's records in a multi-process run.
    for (const char* key : {"precision", "seed", "device", "measure.warmup_steps", "measure.warmup_seconds",
                            "measure.measured_steps", "measure.sync_each_step", "measure.hold_stream", "rank"})
      v.keys.insert(key);
    if (seen_tasks.insert(p->task).second) {
      const PluginManifest* m = registry.find(PluginKind::Task, p->task);
      if (m == nullptr || !m->labels) v.labels_known = false;
      else v.keys.insert(m->labels->begin(), m->labels->end());
      if (m != nullptr) add_nested_option_keys(m->options, "", registry, 0, v.keys);
    }
    if (const auto metrics = declared_metrics(p->task, p->params, registry)) v.metrics.insert(metrics->begin(), metrics->end());
    else v.metrics_known = false;
    for (const Params& profiler : p->profilers) {
      if (!seen_profilers.insert(profiler.plugin_name()).second) continue;
      const PluginManifest* m = registry.find(PluginKind::Profiler, profiler.plugin_name());
      if (m == nullptr || !m->metrics) v.metrics_known = false;
      else
        for (const std::string& entry : *m->metrics) v.metrics.insert(declared_metric_name(entry));
      // A profiler's own records (Profiler::emit_records) carry its labels and the host's.
      if (m != nullptr && m->labels) v.keys.insert(m->labels->begin(), m->labels->end());
      v.keys.insert("profiler");
    }
  }
  return v;
}

// env.<field>: what a record's env holds (capture_environment in output/environment.cpp; launcher,
// world_size and backend from run/run_output.cpp in multi-process runs).
bool is_environment_field(const std::string& name) {
  static const std::set<std::string> fields = {"env.device",     "env.gpu",        "env.cpu",        "env.libtorch",
                                               "env.cuda_runtime", "env.driver",   "env.host",       "env.git_commit",
                                               "env.runner_version", "env.launcher", "env.world_size", "env.backend"};
  return fields.count(name) > 0;
}

// Fails on a name that the records of `scope` ("part matmul" or "this experiment") lack.
void check_name(const RecordName& n, const std::string& scope, const Vocabulary& v) {
  if (n.metric) {
    if (!v.metrics_known || v.metrics.count(n.name)) return;
    throw ConfigError(n.where + ": " + n.path + ": no metric '" + n.name + "' in the records of " + scope +
                      suggestion(n.name, std::vector<std::string>(v.metrics.begin(), v.metrics.end())));
  }
  if (n.name.empty() || v.keys.count(n.name) || !v.labels_known || is_environment_field(n.name)) return;
  throw ConfigError(n.where + ": " + n.path + ": no parameter or label '" + n.name + "' in the records of " + scope +
                    suggestion(n.name, std::vector<std::string>(v.keys.begin(), v.keys.end())));
}

}  // namespace

std::optional<std::set<std::string>> declared_metrics(const std::string& task, const Params& params,
                                                      const PluginRegistry& registry) {
  const PluginManifest* m = registry.find(PluginKind::Task, task);
  if (m == nullptr || !m->metrics) return std::nullopt;
  std::set<std::string> metrics;
  for (const std::string& entry : *m->metrics) metrics.insert(declared_metric_name(entry));
  add_nested_metrics(params, *m, registry, metrics);
  return metrics;
}

std::string declared_metric_name(const std::string& entry) {
  const size_t end = std::min(entry.find(" if "), entry.find('?'));
  return entry.substr(0, end);
}

std::vector<std::string> required_metrics(const std::string& task, const Params& params,
                                          const PluginRegistry& registry) {
  return required_metrics(task, params.flatten(), registry);
}

std::vector<std::string> required_metrics(const std::string& task, const std::map<std::string, std::string>& options,
                                          const PluginRegistry& registry) {
  const PluginManifest* m = registry.find(PluginKind::Task, task);
  if (m == nullptr || !m->metrics) return {};
  std::vector<std::string> required;
  for (const std::string& entry : *m->metrics) {
    const auto bad = [&](const std::string& why) {
      return std::invalid_argument("task/" + task + " declares metric '" + entry + "': " + why +
                                   R"( (write "name", "name?" or "name if option=a|b and option!=c"))");
    };
    const size_t at = entry.find(" if ");
    if (entry.find('?') != std::string::npos) {
      if (entry.back() != '?' || at != std::string::npos) throw bad("'?' only ends a name");
      continue;
    }
    if (at == std::string::npos) {
      required.push_back(entry);
      continue;
    }
    bool all = true;
    std::string conditions = entry.substr(at + 4);
    for (size_t from = 0; from <= conditions.size();) {
      const size_t and_at = std::min(conditions.find(" and ", from), conditions.size());
      const std::string condition = conditions.substr(from, and_at - from);
      from = and_at + 5;
      const size_t eq = condition.find('=');
      if (eq == std::string::npos || eq == 0) throw bad("'" + condition + "' is not option=value or option!=value");
      const bool negated = condition[eq - 1] == '!';
      const std::string key = condition.substr(0, eq - (negated ? 1 : 0));
      const auto option = options.find(key);
      if (option == options.end()) throw bad("no option '" + key + "'");
      bool any = false;
      const std::string values = condition.substr(eq + 1);
      for (size_t v = 0; v <= values.size();) {
        const size_t bar = std::min(values.find('|', v), values.size());
        any = any || values.substr(v, bar - v) == option->second;
        v = bar + 1;
      }
      all = all && (any != negated);
    }
    if (all) required.push_back(declared_metric_name(entry));
  }
  return required;
}

void validate_report(const ExperimentSpec& exp, const std::vector<Point>& points, const PluginRegistry& registry) {
  std::vector<std::string> part_names;
  for (const Point& p : points)
    if (std::find(part_names.begin(), part_names.end(), p.part) == part_names.end()) part_names.push_back(p.part);
  for (const ReportReader& reader : exp.report_readers) {
    // The points a table or figure reads (its parts, or all) and the names they offer.
    const std::vector<std::string>& named = reader.parts.names;
    for (const std::string& part : named)
      if (std::find(part_names.begin(), part_names.end(), part) == part_names.end())
        throw ConfigError(reader.part_where + ": " + reader.path + ".part: no part named '" + part + "'" +
                          suggestion(part, part_names));
    std::vector<const Point*> members;
    for (const Point& p : points)
      if (reader.parts.holds(p.part)) members.push_back(&p);
    Vocabulary v = vocabulary_of(members, registry);
    if (reader.figure) v.keys.insert("part");  // a figure may split its series by part
    std::string scope = named.empty() ? "this experiment" : named.size() == 1 ? "part " : "parts ";
    for (std::size_t i = 0; i < named.size(); ++i) scope += (i ? ", " : "") + named[i];
    for (const RecordName& name : reader.names) check_name(name, scope, v);
  }
  exp.reports();  // a malformed report after those checked throws its error now
}

}  // namespace runner
