// Fuzz target for the config path: YAML load, --set parsing, --smoke, validation
// against declared options, sweep counting and expansion, and the report spec
// check. Any exception other than the two user-error types is a bug (a raw C++
// error would reach the user), and so is any sanitizer report.
//
// Input: an experiment file. Comment lines "#set key.path=value" become --set
// overrides and a line "#smoke" turns on --smoke, so one input drives every step.
// The registry holds the synthetic plugins below (no .so is loaded), which use
// every option type, ranges, a nested plugin and declared metrics/labels.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "report/report.hpp"
#include "config/report_spec_check.hpp"
#include "config/sweep.hpp"

namespace {

using namespace runner;

std::unique_ptr<PluginBase> never_created(const Params&, Context&) { return nullptr; }

PluginManifest task_manifest() {
  PluginManifest m;
  m.kind = PluginKind::Task;
  m.name = "fuzz_task";
  m.version = "1";
  m.description = "synthetic task for the config fuzzer";
  m.options = {
      opt_enum("op", {"matmul", "copy"}, "matmul", "an enum"),
      opt_int("size", 1024, "an int with a range").in_range(1, 1 << 20),
      opt_float("value", 1.5, "a float").in_range(-1e6, 1e6),
      opt_bool("flag", false, "a bool"),
      opt_string("word", "hello", "a string"),
      opt_list("sizes", OptionType::IntList, Value::List{Value(1)}, "an int list").at_least(0),
      opt_list("labels", OptionType::StringList, Value::List{Value("a")}, "a string list"),
      opt_list("scales", OptionType::FloatList, Value::List{Value(1.0)}, "a float list"),
      opt_plugin("optimizer", PluginKind::Optimizer, "fuzz_sgd", "a nested plugin"),
      opt_int("required_count", Value(), "a required option").at_least(0),
  };
  m.metrics = std::vector<std::string>{"time_ms", "tflops", "word"};
  m.labels = std::vector<std::string>{"item"};
  m.create = never_created;
  return m;
}

PluginManifest open_task_manifest() {
  PluginManifest m;
  m.kind = PluginKind::Task;
  m.name = "fuzz_open_task";
  m.version = "1";
  m.description = "declares no metrics or labels";
  m.options = {opt_string("script", Value(), "required string")};
  m.create = never_created;
  return m;
}

PluginManifest optimizer_manifest() {
  PluginManifest m;
  m.kind = PluginKind::Optimizer;
  m.name = "fuzz_sgd";
  m.version = "1";
  m.description = "synthetic optimizer";
  m.options = {opt_float("lr", 1e-3, "learning rate").at_least(0), opt_float("momentum", 0.0, "m").in_range(0, 1)};
  m.create = never_created;
  return m;
}

PluginManifest profiler_manifest() {
  PluginManifest m;
  m.kind = PluginKind::Profiler;
  m.name = "fuzz_memory";
  m.version = "1";
  m.description = "synthetic profiler";
  m.options = {opt_int("top_k", 10, "rows").in_range(1, 100), opt_string("figure_dir", "", "a path")};
  m.metrics = std::vector<std::string>{"peak_allocated_bytes"};
  m.create = never_created;
  return m;
}

const PluginRegistry& fuzz_registry() {
  static const PluginManifest manifests[] = {task_manifest(), open_task_manifest(), optimizer_manifest(),
                                             profiler_manifest()};
  static PluginRegistry* registry = [] {
    auto* r = new PluginRegistry();
    for (const auto& m : manifests) r->add_manifest(&m, "<fuzz>/" + m.name);
    return r;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  bool smoke = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#set ", 0) == 0) overrides.push_back(line.substr(5));
    if (line == "#smoke") smoke = true;
  }
  try {
    const ExperimentSpec exp = load_experiment_text(text, "fuzz.yaml", overrides, smoke);
    // A small limit keeps each input fast; the count itself must not overflow.
    const std::vector<Point> points = expand_points(exp, fuzz_registry(), 2000);
    validate_report(exp, points, fuzz_registry());
    for (const Point& p : points) (void)describe_point(p);
  } catch (const ConfigError&) {
  } catch (const report::SpecError&) {
  }
  return 0;
}
