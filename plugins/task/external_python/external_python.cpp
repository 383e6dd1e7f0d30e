// Runs a Python script as one experiment point and turns what it prints into
// records, so a PyTorch twin of a C++ measurement lands in the same results.jsonl
// and the same report tables.
//
// Command line:  <python> <script> --device cpu|cuda --precision <name> --seed <n>
//                --warmup <w> --steps <n> --repetitions <r> --cache warm|cold
//                [--target-rel-stderr <t> --min-steps <a> --max-steps <b> --max-seconds <s>]
//                --model <name> --model.<option> <value> ... <args...>
// (the bracketed flags only when the point measures adaptively).
// The model flags are the resolved `model` options (so one `sweep: {model.size: [...]}`
// drives the C++ and the Python parts alike, and validates the sizes).
//
// Protocol: every stdout line that starts with '{' is one record:
//   {"labels": {"k": "v"}, "metrics": {"name": {"unit": "ms", "samples": [..], "repetition_means": [..]}
//                                             | {"unit": "bytes", "value": 1.0}
//                                             | {"text": "..."}}}
// An optional "measurement": {"mode", "n", "rel_stderr", "target_rel_stderr",
// "target_met", "stop_reason", ...} says how the script's loop stopped; the host
// stores it like its own. {"oom": true, ...} makes the point `oom`. A non-zero exit, or no record line,
// makes it `error` with the tail of the script's stderr.
#include <c10/util/Exception.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/device.hpp"
#include "runner/task.hpp"
#include "subprocess.hpp"

namespace {

using nlohmann::json;
constexpr size_t kStderrTailChars = 2000;

std::string tail(const std::string& text) {
  return text.size() <= kStderrTailChars ? text : "..." + text.substr(text.size() - kStderrTailChars);
}

// The interpreter whose PyTorch the build used (recorded at configure time), so the
// Python side of a comparison runs against the same torch as the C++ side.
#ifndef RUNNER_BUILD_PYTHON
#define RUNNER_BUILD_PYTHON ""
#endif

}  // namespace

namespace plugins::external_python {

std::string python_executable(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("RUNNER_PYTHON"); env != nullptr && *env != '\0') return env;
  if (const std::string built = RUNNER_BUILD_PYTHON; !built.empty() && std::filesystem::exists(built)) return built;
  return "python3";
}

void check_interpreter(const std::string& python) {
  static std::map<std::string, std::string> checked;  // interpreter -> "" or the problem
  auto [it, fresh] = checked.emplace(python, "");
  if (fresh) {
    ProcessResult result;
    try {
      result = run_process({python, "-c", "import torch"});
    } catch (const std::exception& e) {
      result.exit_code = 127;
      result.stderr_text = e.what();
    }
    if (result.exit_code != 0) {
      std::string why = result.stderr_text;
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      if (const auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
      it->second = "interpreter '" + python + "' cannot import torch" + (why.empty() ? "" : " (" + why + ")") +
                   "; choose one that can with RUNNER_PYTHON=/path/to/python or params.python";
    }
  }
  if (!it->second.empty()) throw std::runtime_error(it->second);
}

}  // namespace plugins::external_python

namespace {

using plugins::external_python::python_executable;

std::string as_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

runner::Metric to_metric(const std::string& name, const json& m) {
  if (!m.is_object()) throw std::runtime_error("metric '" + name + "' is not an object");
  runner::Metric metric;
  metric.unit = m.value("unit", std::string());
  if (m.contains("text")) {
    metric.value = as_text(m["text"]);
  } else if (m.contains("samples")) {
    runner::Stats stats = runner::Stats::of(m["samples"].get<std::vector<double>>());
    if (m.contains("repetition_means")) stats.repetition_means = m["repetition_means"].get<std::vector<double>>();
    metric.value = stats;
  } else if (m.contains("value")) {
    metric.value = m["value"].get<double>();
  } else {
    throw std::runtime_error("metric '" + name + "' has none of samples, value, text");
  }
  return metric;
}

std::string number_text(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

// The script's "measurement" object: how its own loop measured and stopped.
runner::MeasureSummary to_summary(const json& m) {
  if (!m.is_object()) throw std::runtime_error("external_python: \"measurement\" is not an object");
  runner::MeasureSummary s;
  s.mode = m.value("mode", std::string("fixed"));
  s.cache = m.value("cache", std::string("warm"));
  s.repetitions = m.value("repetitions", 1);
  s.n = m.value("n", std::int64_t{0});
  s.rel_stderr = m.value("rel_stderr", 0.0);
  s.target_rel_stderr = m.value("target_rel_stderr", 0.0);
  s.target_met = m.value("target_met", true);
  s.stop_reason = m.value("stop_reason", std::string());
  s.measured_seconds = m.value("measured_seconds", 0.0);
  return s;
}

runner::Record to_record(const json& line) {
  runner::Record r;
  const json labels = line.value("labels", json::object());  // named: items() must not outlive it
  const json metrics = line.value("metrics", json::object());
  for (const auto& [key, value] : labels.items()) r.label(key, as_text(value));
  for (const auto& [name, m] : metrics.items()) {
    r.add(name, to_metric(name, m));
  }
  return r;
}

class ExternalPython : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const std::string script = p.text("script");
    if (!std::filesystem::exists(script))
      throw std::runtime_error("external_python: script '" + script + "' not found (relative to " +
                               std::filesystem::current_path().string() + ")");
    std::vector<std::string> argv = {python_executable(p.text("python")), script,
                                     "--device", ctx.device.is_cuda() ? "cuda" : "cpu",
                                     "--precision", ctx.precision.name,
                                     "--seed", std::to_string(ctx.seed),
                                     "--warmup", std::to_string(ctx.measure.warmup_steps),
                                     "--steps", std::to_string(ctx.measure.measured_steps),
                                     "--repetitions", std::to_string(ctx.measure.repetitions),
                                     "--cache", ctx.measure.cache};
    if (ctx.measure.adaptive()) {
      argv.insert(argv.end(), {"--target-rel-stderr", number_text(ctx.measure.target_rel_stderr),
                               "--min-steps", std::to_string(ctx.measure.min_steps),
                               "--max-steps", std::to_string(ctx.measure.max_steps),
                               "--max-seconds", number_text(ctx.measure.max_seconds)});
    }
    for (const auto& [key, value] : p.flatten())
      if (key == "model" || key.rfind("model.", 0) == 0) argv.insert(argv.end(), {"--" + key, value});
    for (const std::string& a : p.texts("args")) argv.push_back(a);

    std::string command;
    for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
    if (ctx.log) ctx.log->info("external_python: " + command);
    // The script is another process on the same GPU: hand back what this process's
    // caching allocator holds (earlier points) so the script can use it.
    runner::release_cached_memory(ctx.device);
    const auto result = plugins::external_python::run_process(argv);

    std::vector<runner::Record> records;
    std::istringstream lines(result.stdout_text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] != '{') continue;
      json parsed;
      try {
        parsed = json::parse(line);
      } catch (const json::exception& e) {
        throw std::runtime_error("external_python: " + script + " printed a malformed record: " + e.what());
      }
      if (parsed.value("oom", false)) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "external_python: ", script, " ran out of memory: ",
                         as_text(parsed.value("error", json("(no message)"))));
      }
      records.push_back(to_record(parsed));
      if (parsed.contains("measurement")) ctx.measurements.push_back(to_summary(parsed["measurement"]));
    }
    if (result.exit_code != 0)
      throw std::runtime_error("external_python: `" + command + "` exited with " + std::to_string(result.exit_code) +
                               "; stderr: " + tail(result.stderr_text));
    if (records.empty())
      throw std::runtime_error("external_python: `" + command + "` printed no JSON record; stderr: " +
                               tail(result.stderr_text));
    for (auto& r : records) out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "external_python";
  m.version = "1";
  m.description = "runs a Python script (e.g. the PyTorch twin of a C++ benchmark) and records what it prints";
  m.options = {
      runner::opt_string("script", runner::Value(), "path of the script, relative to the working directory"),
      runner::opt_list("args", runner::OptionType::StringList, runner::Value(runner::Value::List{}),
                       "extra arguments after the standard flags"),
      runner::opt_string("python", "", "interpreter; empty = $RUNNER_PYTHON, else the one whose PyTorch the build used"),
      runner::opt_plugin("model", runner::PluginKind::Model, "transformer_lm",
                         "model whose resolved options are passed as --model.<option> <value>"),
  };
  m.preflight = [](const runner::Params& p) {
    plugins::external_python::check_interpreter(python_executable(p.text("python")));
  };
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<ExternalPython>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
