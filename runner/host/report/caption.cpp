// Table captions: the author's text, what pivot cells hold, and a setup sentence
// (device, software, warm-up/steps, parameters fixed across the table) computed
// from the records themselves.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "report/record_fields.hpp"
// The named sizes' dimensions, so a caption can say what model.size=xl resolved to
// (records keep the options as given, where 0 means "from the size").
#include "runner/model_sizes.hpp"

namespace runner::report::detail {
namespace {

using nlohmann::json;

// ---- caption ----------------------------------------------------------------

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// Distinct non-empty values in first-appearance order.
template <typename Field>
std::vector<std::string> distinct(const std::vector<const StoredRecord*>& records, Field field) {
  std::vector<std::string> values;
  for (const StoredRecord* record : records) {
    const std::string value = field(*record);
    if (!value.empty() && std::find(values.begin(), values.end(), value) == values.end())
      values.push_back(value);
  }
  return values;
}

std::string env_text(const StoredRecord& record, const char* key) {
  const auto value = record.env.find(key);
  return value == record.env.end() || value->is_null() ? "" : render_value(*value);
}

std::string param_text(const StoredRecord& record, const char* key) {
  const auto value = record.params.find(key);
  return value == record.params.end() ? "" : render_value(*value);
}

std::string device_name(const StoredRecord& record) {
  std::string name = env_text(record, "gpu");
  if (name.empty()) name = env_text(record, "cpu");
  const std::string device = env_text(record, "device");
  if (name.empty() || device.empty()) return name + device;
  return name + " (" + device + ")";
}

// "NVIDIA H100 80GB HBM3 (cuda), driver 580.159.04, CUDA 13.0, LibTorch 2.11.0"
std::string machine_clause(const std::vector<const StoredRecord*>& records) {
  std::vector<std::string> parts;
  const auto add = [&](const std::string& prefix, const std::vector<std::string>& values) {
    if (!values.empty()) parts.push_back(prefix + join(values, " / "));
  };
  add("", distinct(records, device_name));
  // A CUDA build records its driver and runtime on any device; they only describe
  // the run when it ran on the GPU.
  const auto on_gpu = [](const StoredRecord& r, const char* key) {
    return env_text(r, "device") == "cuda" ? env_text(r, key) : std::string();
  };
  add("driver ", distinct(records, [&](const StoredRecord& r) { return on_gpu(r, "driver"); }));
  add("CUDA ", distinct(records, [&](const StoredRecord& r) { return on_gpu(r, "cuda_runtime"); }));
  add("LibTorch ", distinct(records, [](const StoredRecord& r) { return env_text(r, "libtorch"); }));
  return join(parts, ", ");
}

// Points measured while others ran on the same host (runner --workers / --gpus, whose
// records name their worker; a multi-process point's also all of its workers and GPUs,
// env.workers and env.gpu_indices): said, since shared CPU, memory and power may move the numbers.
std::string concurrency_clause(const std::vector<const StoredRecord*>& records) {
  const auto each = [](const StoredRecord& r, const char* all, const char* one) {
    std::vector<std::string> out;
    if (const auto list = r.env.find(all); list != r.env.end() && list->is_array())
      for (const json& v : *list) out.push_back(render_value(v));
    else if (std::string v = env_text(r, one); !v.empty())
      out.push_back(std::move(v));
    return out;
  };
  std::vector<std::string> workers, gpus;
  bool several = false;  // a point on several GPUs
  for (const StoredRecord* r : records) {
    for (const std::string& w : each(*r, "workers", "worker"))
      if (std::find(workers.begin(), workers.end(), w) == workers.end()) workers.push_back(w);
    const std::vector<std::string> own = each(*r, "gpu_indices", "gpu_index");
    several = several || own.size() > 1;
    for (const std::string& g : own)
      if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
  }
  if (workers.empty()) return "";
  if (!gpus.empty())
    return std::string("points ran concurrently, ") + (several ? "each on its own GPUs" : "one per GPU") +
           ", on GPUs " + join(gpus, ", ") + " of the host";
  return "points ran concurrently on " + std::to_string(workers.size()) + " worker processes of the host";
}

// "n = 12–300" over the records' measurement summaries; empty when none has one.
std::string n_range(const std::vector<const StoredRecord*>& records) {
  long long lo = -1, hi = -1;
  for (const StoredRecord* r : records) {
    const auto m = r->observed.find("measurement");
    if (m == r->observed.end()) continue;
    for (const json& s : m->is_array() ? *m : json::array({*m})) {
      if (!s.is_object() || !s.contains("n") || !s["n"].is_number()) continue;
      const long long n = s["n"].get<long long>();
      lo = lo < 0 ? n : std::min(lo, n);
      hi = std::max(hi, n);
    }
  }
  if (lo < 0) return "";
  return "n = " + std::to_string(lo) + (hi != lo ? "–" + std::to_string(hi) : "");
}

// Which clock timed the record's steps: the record says so ("timer"), else the
// device does (the host times CUDA work with events, CPU work with a steady clock).
std::string timer_of(const StoredRecord& record) {
  bool timed = false;
  for (const auto& [name, metric] : record.metrics)
    timed = timed || (std::holds_alternative<Stats>(metric.value) && metric.unit == "ms");
  if (!timed) return "";
  std::string timer = record.observed.value("timer", std::string());
  if (timer.empty()) timer = env_text(record, "timer");
  if (timer.empty()) timer = env_text(record, "device") == "cuda" ? "cuda_events" : "steady_clock";
  if (timer == "cuda_events") return "timed with CUDA events";
  if (timer == "steady_clock") return "timed with the host's steady clock";
  return "timed with " + timer;
}

std::string steps_clause(const std::vector<const StoredRecord*>& records) {
  const auto warmup = distinct(records, [](const StoredRecord& r) { return param_text(r, "measure.warmup_steps"); });
  const auto measured =
      distinct(records, [](const StoredRecord& r) { return param_text(r, "measure.measured_steps"); });
  const auto target = distinct(records, [](const StoredRecord& r) {
    const std::string t = param_text(r, "measure.target_rel_stderr");
    return t == "0" || t == "0.0" ? std::string() : t;
  });
  const auto repetitions = distinct(records, [](const StoredRecord& r) {
    const std::string n = param_text(r, "measure.repetitions");
    return n == "1" ? std::string() : n;
  });
  const auto cache = distinct(records, [](const StoredRecord& r) { return param_text(r, "measure.cache"); });
  std::vector<std::string> parts;
  if (warmup.size() == 1) parts.push_back("warm-up " + warmup[0]);
  if (warmup.size() > 1) parts.push_back("warm-up varies by row/column");
  if (!target.empty()) {
    std::string text = "measured until the relative standard error of the mean is at most " +
                       (target.size() == 1 ? format_number(100 * std::stod(target[0]), "%.3g") + "%" : "the target");
    if (const std::string n = n_range(records); !n.empty()) text += " (" + n + " steps)";
    parts.push_back(text);
  } else {
    if (measured.size() == 1) parts.push_back("measured " + measured[0] + " steps");
    if (measured.size() > 1) parts.push_back("measured steps vary by row/column");
  }
  if (repetitions.size() == 1) parts.push_back(repetitions[0] + " repetitions");
  if (std::find(cache.begin(), cache.end(), "cold") != cache.end()) parts.push_back("cache flushed before every step");
  const auto timers = distinct(records, timer_of);
  if (!timers.empty()) parts.push_back(join(timers, " / "));
  return join(parts, ", ");
}

// "d_model 1600, d_ff 6400, 48 layers, 25 heads" for a transformer_lm record: the named
// size's dimensions with any non-zero option on top; "" for other models.
std::string model_dims(const json& params) {
  if (!params.is_object() || params.value("model", json()) != "transformer_lm") return "";
  const auto integer = [&](const char* key) {
    const auto it = params.find(key);
    return it != params.end() && it->is_number() ? it->get<long long>() : 0LL;
  };
  long long d_model = 0, d_ff = 0, layers = 0, heads = 0;
  const auto size = params.find("model.size");
  if (size != params.end() && size->is_string())
    for (const auto& s : kModelSizes)
      if (*size == s.name) d_model = s.d_model, d_ff = s.d_ff, layers = s.num_layers, heads = s.num_heads;
  if (integer("model.d_model")) d_model = integer("model.d_model");
  if (integer("model.d_ff")) d_ff = integer("model.d_ff");
  if (integer("model.num_layers")) layers = integer("model.num_layers");
  if (integer("model.num_heads")) heads = integer("model.num_heads");
  if (!d_model || !d_ff || !layers || !heads) return "";
  return "d_model " + std::to_string(d_model) + ", d_ff " + std::to_string(d_ff) + ", " + std::to_string(layers) +
         " layers, " + std::to_string(heads) + " heads";
}

// Params equal in every record, minus what the table shows and what says nothing
// about the setup (seed, device, measure.*, list values). Only what a reader needs:
// top-level choices and the model's size, context and resolved dimensions; a plugin's
// other options (optimizer.beta1, model.rope_theta, ...) and switches left off stay
// in the records.
std::string fixed_clause(const std::vector<const StoredRecord*>& records,
                         const std::set<std::string>& shown_keys) {
  static const std::set<std::string> kNestedShown = {"model.size", "model.context_length", "model.attention",
                                                     "ddp.bucket_size_mb"};
  const auto ignored = [&](const std::string& key, const json& value) {
    const bool nested = key.find('.') != std::string::npos && !kNestedShown.count(key);
    return shown_keys.count(key) || key == "seed" || key == "device" || nested || value == false ||
           (value.is_string() && value.get<std::string>().empty()) || key.rfind("measure.", 0) == 0 ||
           value.is_array() || value.is_object();
  };
  std::map<std::string, std::string> fixed;  // sorted by key: deterministic
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json& params = records[i]->params;
    if (i == 0) {
      for (const auto& [key, value] : params.items())
        if (!ignored(key, value)) fixed[key] = render_value(value);
      continue;
    }
    for (auto it = fixed.begin(); it != fixed.end();) {
      const auto value = params.find(it->first);
      const bool same = value != params.end() && render_value(*value) == it->second;
      it = same ? std::next(it) : fixed.erase(it);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [key, value] : fixed) parts.push_back(key + "=" + value);
  // The dimensions, when every record has the same ones (a model.size column still has one
  // value then) and the table does not show them.
  if (!records.empty() && !shown_keys.count("model.d_model")) {
    const std::string dims = model_dims(records.front()->params);
    bool same = !dims.empty();
    for (const StoredRecord* r : records) same = same && model_dims(r->params) == dims;
    if (same) parts.push_back("model: " + dims);
  }
  return parts.empty() ? "" : "fixed: " + join(parts, ", ");
}

// Pivot headers are key values, so say what the cells hold and in which unit.
std::string cells_sentence(const TableSpec& spec, const std::vector<const StoredRecord*>& records) {
  if (spec.pivot.empty()) return "";
  std::string what = spec.metric;
  for (const StoredRecord* record : records) {
    const Metric* metric = record->metric(spec.metric);
    if (!metric) continue;
    if (std::holds_alternative<Stats>(metric->value)) {
      what += " " + (spec.stat.empty() ? std::string("mean") : spec.stat);
      if (spec.show_std) what += " ± std";
    }
    if (!metric->unit.empty()) what += " (" + metric->unit + ")";
    break;
  }
  return "Cells: " + what + " by " + spec.pivot + ".";
}

std::string one_line(std::string text) {
  std::replace_if(text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

}  // namespace

std::string caption(const TableSpec& spec, const std::vector<const StoredRecord*>& records,
                    const std::set<std::string>& shown_keys) {
  std::vector<std::string> sentences;
  if (const std::string author = one_line(spec.caption); !author.empty()) sentences.push_back(author);
  if (const std::string cells = cells_sentence(spec, records); !cells.empty()) sentences.push_back(cells);
  std::vector<std::string> setup;
  for (const std::string& clause :
       {machine_clause(records), concurrency_clause(records), steps_clause(records), fixed_clause(records, shown_keys)})
    if (!clause.empty()) setup.push_back(clause);
  if (records.empty()) sentences.push_back("No matching records yet.");
  else if (!setup.empty()) sentences.push_back("Setup: " + join(setup, "; ") + ".");
  if (!spec.question.empty()) sentences.push_back("Question: " + spec.question + ".");
  return join(sentences, " ");
}


}  // namespace runner::report::detail
