// Analytic answers of the spec's measured questions, computed from the same
// configuration as the runs (the model plugin's declared facts, the sweep's
// shapes), optionally beside the measured value read from that run's records
// (runner/record_selection.hpp) with the difference. Formulas: model_formulas.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runner/record_selection.hpp"
#include "model_formulas.hpp"
#include "runner/task.hpp"

namespace plugins::accounting {
namespace {

using Selection = runner::RecordSelection;
using runner::find_all_measured;
using runner::find_measured;
using runner::MeasuredRecord;
using runner::parse_where;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMB = 1e6;

// Every analytic metric of each quantity: what `compare` may name.
const std::map<std::string, std::vector<std::string>>& analytic_metrics() {
  static const std::map<std::string, std::vector<std::string>> metrics{
      {"attention_memory",
       {"matrix_gib", "saved_gib", "before_backward_gib", "forward_peak_gib", "backward_peak_gib", "saved_growth_per_doubling"}},
      {"kernel_flops",
       {"linear_gflop", "lm_head_gflop", "attention_scores_gflop", "softmax_gflop", "attention_values_gflop", "total_gflop",
        "matmul_share_pct", "softmax_per_attention_matmul_pct"}},
      {"bucket_overhead",
       {"gradient_mb", "bandwidth_gbps", "call_overhead_ms", "buckets", "overhead_ms", "last_bucket_ms", "best_bucket_mb", "best_buckets",
        "best_overhead_ms"}},
      {"optimizer_memory",
       {"parameters_gib", "gradients_gib", "optimizer_state_gib", "total_gib", "traffic_gb_per_step"}},
  };
  return metrics;
}

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

double fact(const std::map<std::string, double>& facts, const runner::Params& model, const char* key) {
  const auto it = facts.find(key);
  if (it == facts.end())
    throw runner::SkipPoint("accounting: model '" + model.plugin_name() + "' declares no " + std::string(key));
  return it->second;
}

std::map<std::string, double> model_facts(runner::Context& ctx, const runner::Params& p) {
  if (p.plugin("model").plugin_name() == "none")
    throw std::invalid_argument("accounting: quantity " + p.text("quantity") +
                                " needs a model; set model: {name: transformer_lm, size: ...}");
  try {
    return ctx.facts(runner::PluginKind::Model, p.plugin("model"));
  } catch (const std::runtime_error& e) {
    throw runner::SkipPoint("accounting: " + std::string(e.what()));
  }
}

runner::Record attention_memory(const runner::Params& p) {
  NaiveAttention a{static_cast<double>(p.integer("batch_size")), static_cast<double>(p.integer("seq")),
                   static_cast<double>(p.integer("d_head")), static_cast<double>(p.integer("dtype_bytes"))};
  NaiveAttention doubled = a;
  doubled.s *= 2;
  const double device = p.number("device_memory_gib") * kGiB;
  runner::Record r;
  r.add("matrix_gib", a.matrix() / kGiB, "GiB");
  r.add("saved_gib", a.saved() / kGiB, "GiB");
  r.add("before_backward_gib", a.before_backward() / kGiB, "GiB");
  r.add("forward_peak_gib", a.forward_peak() / kGiB, "GiB");
  r.add("backward_peak_gib", a.backward_peak() / kGiB, "GiB");
  r.add("saved_growth_per_doubling", doubled.saved() / a.saved(), "x");
  r.add_text("fits_device", a.forward_peak() > device ? "no (forward OOM)" : a.backward_peak() > device ? "no (backward OOM)" : "yes");
  r.add_text("derivation", "b s^2 e = " + fixed(a.b, 0) + " x " + fixed(a.s, 0) + "^2 x " + fixed(a.e, 0) + " B = " +
                               fixed(a.matrix() / kGiB, 3) + " GiB; forward peak = 3 b s d e + 3 b s^2 e = " +
                               fixed(a.forward_peak() / kGiB, 3) + " GiB");
  return r;
}

runner::Record kernel_flops(runner::Context& ctx, const runner::Params& p) {
  const auto facts = model_facts(ctx, p);
  const runner::Params& model = p.plugin("model");
  ForwardFlops f;
  f.b = static_cast<double>(p.integer("batch_size"));
  f.s = fact(facts, model, "context_length");
  f.d = fact(facts, model, "d_model");
  f.d_ff = fact(facts, model, "d_ff");
  f.layers = fact(facts, model, "num_layers");
  f.heads = fact(facts, model, "num_heads");
  f.vocab = fact(facts, model, "vocab_size");
  f.softmax_per_element = p.number("softmax_flops_per_element");
  const double matmuls = f.linear() + f.lm_head() + f.attention_scores() + f.attention_values();
  runner::Record r;
  r.add("linear_gflop", f.linear() / 1e9, "GFLOP");
  r.add("lm_head_gflop", f.lm_head() / 1e9, "GFLOP");
  r.add("attention_scores_gflop", f.attention_scores() / 1e9, "GFLOP");
  r.add("softmax_gflop", f.softmax() / 1e9, "GFLOP");
  r.add("attention_values_gflop", f.attention_values() / 1e9, "GFLOP");
  r.add("total_gflop", f.total() / 1e9, "GFLOP");
  r.add("matmul_share_pct", 100 * matmuls / f.total(), "%");
  r.add("softmax_per_attention_matmul_pct", 100 * f.softmax_per_attention_matmul(), "%");
  r.add_text("derivation", "softmax / (QK^T + PV) = " + fixed(f.softmax_per_element, 0) + " / (4 x d_head " +
                               fixed(f.d / f.heads, 0) + ") = " + fixed(100 * f.softmax_per_attention_matmul(), 2) + "%");
  return r;
}

Selection selection(const runner::Params& p, const char* file, const char* part, const char* where) {
  Selection s;
  s.file = p.text(file);
  s.part = p.text(part);
  s.where = parse_where(p.texts(where), p.flatten(), where);
  return s;
}

// o and w of the bucket model: fitted to measured all-reduce times, or as given.
std::pair<double, double> overhead_and_bandwidth(const runner::Params& p, std::string& source) {
  if (p.text("fit_file").empty()) {
    source = "given";
    return {p.number("call_overhead_ms") / 1e3, p.number("bandwidth_gbps") * 1e9};
  }
  const Selection s = selection(p, "fit_file", "fit_part", "fit_where");
  std::vector<std::pair<double, double>> points;  // bytes, seconds
  for (const MeasuredRecord& r : find_all_measured(s, "median")) {
    const auto bytes = r.numbers.find("bytes"), time = r.numbers.find("time_ms");
    if (r.status != runner::RecordStatus::ok) continue;
    if (bytes == r.numbers.end() || time == r.numbers.end())
      throw std::invalid_argument("fit_file '" + s.file.string() +
                                  "': records need the metrics bytes and time_ms (an allreduce_bench run)");
    points.emplace_back(bytes->second, time->second / 1e3);
  }
  const LineFit line = fit_line(points);
  if (points.size() < 2 || line.slope <= 0 || line.intercept <= 0)
    throw std::invalid_argument("fit_file '" + s.file.string() + "': the selected all-reduce times (" +
                                std::to_string(points.size()) +
                                " points) give no positive overhead and bandwidth; select one backend and process "
                                "count over several sizes (fit_where)");
  source = "fit to " + std::to_string(points.size()) + " all-reduce sizes";
  return {line.intercept, 1.0 / line.slope};
}

runner::Record bucket_overhead(runner::Context& ctx, const runner::Params& p) {
  const auto facts = model_facts(ctx, p);
  std::string source;
  const auto [o, w] = overhead_and_bandwidth(p, source);
  BucketModel m{fact(facts, p.plugin("model"), "parameters") * p.number("gradient_bytes"), w, o};
  const double n_b = m.buckets(p.number("bucket_mb") * kMB);
  runner::Record r;
  r.add("gradient_mb", m.s / kMB, "MB");
  r.add("bandwidth_gbps", w / 1e9, "GB/s");
  r.add("call_overhead_ms", o * 1e3, "ms");
  r.add("buckets", n_b, "count");
  r.add("overhead_ms", m.overhead(n_b) * 1e3, "ms");
  r.add("last_bucket_ms", m.last_bucket(n_b) * 1e3, "ms");
  r.add("best_bucket_mb", m.best_bucket_bytes() / kMB, "MB");
  r.add("best_buckets", m.best_buckets(), "count");
  r.add("best_overhead_ms", m.best_overhead() * 1e3, "ms");
  r.add_text("derivation", "o, w " + source + "; " + fixed(n_b, 0) + " x " + fixed(o * 1e3, 4) + " ms + " +
                               fixed(m.s / kMB, 0) + " MB / (" + fixed(n_b, 0) + " x " + fixed(w / 1e9, 1) +
                               " GB/s) = " + fixed(m.overhead(n_b) * 1e3, 2) + " ms");
  return r;
}

runner::Record optimizer_memory(runner::Context& ctx, const runner::Params& p) {
  const auto facts = model_facts(ctx, p);
  const std::string& name = p.text("scheme");
  const Scheme scheme = name == "adamw" ? Scheme::Unsharded
                        : name == "sharded" ? Scheme::Sharded
                        : name == "zero1" ? Scheme::Zero1
                                          : Scheme::Zero1Mixed;
  const double params = fact(facts, p.plugin("model"), "parameters");
  const double n = static_cast<double>(p.integer("world_size"));
  const ShardingMemory m = sharding_memory(scheme, params, n);
  runner::Record r;
  r.add("parameters_gib", m.weights / kGiB, "GiB");
  r.add("gradients_gib", m.gradients / kGiB, "GiB");
  r.add("optimizer_state_gib", m.optimizer_state / kGiB, "GiB");
  r.add("total_gib", m.total() / kGiB, "GiB");
  r.add("traffic_gb_per_step", m.traffic / 1e9, "GB");
  r.add_text("communication", scheme == Scheme::Unsharded ? "all-reduce gradients"
                              : scheme == Scheme::Sharded  ? "all-reduce gradients + broadcast shards"
                                                           : "reduce-scatter gradients + all-gather weights");
  return r;
}

// Adds measured_<m>, diff_<m> and diff_<m>_pct for each `compare` entry m=measured.
void add_measured(const runner::Params& p, runner::Record& r) {
  if (p.text("measured_file").empty()) return;
  const Selection s = selection(p, "measured_file", "measured_part", "measured_where");
  const MeasuredRecord m = find_measured(s, p.text("measured_stat"));
  r.add_text("measured_status", m.status_text);
  for (const std::string& entry : p.texts("compare")) {
    const auto eq = entry.find('=');
    const std::string mine = entry.substr(0, eq), theirs = entry.substr(eq + 1);
    const runner::Metric* analytic = r.find(mine);
    if (m.status != runner::RecordStatus::ok) {
      r.add_text("measured_" + mine, m.status == runner::RecordStatus::oom ? "OOM" : m.status_text);
      continue;
    }
    const auto it = m.numbers.find(theirs);
    if (it == m.numbers.end()) {
      std::string names;
      for (const auto& [k, v] : m.numbers) names += (names.empty() ? "" : ", ") + k;
      throw std::invalid_argument("measured_file '" + s.file.string() + "': the matched record has no numeric metric '" +
                                  theirs + "' (compare entry '" + entry + "'); it has: " + names);
    }
    const double a = std::get<double>(analytic->value), v = it->second;
    r.add("measured_" + mine, v, m.units.at(theirs));
    r.add("diff_" + mine, v - a, analytic->unit);
    r.add("diff_" + mine + "_pct", a != 0 ? 100 * (v - a) / a : 0.0, "%");
  }
}

// Checks the compare entries against the quantity's metrics; throws one line.
void check_compare(const runner::Params& p) {
  const auto& names = analytic_metrics().at(p.text("quantity"));
  for (const std::string& entry : p.texts("compare")) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      throw std::invalid_argument("compare entry '" + entry + "': expected analytic_metric=measured_metric");
    const std::string mine = entry.substr(0, eq);
    if (std::find(names.begin(), names.end(), mine) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("compare entry '" + entry + "': " + p.text("quantity") + " has no metric '" + mine +
                                  "'; use one of " + list);
    }
  }
  if (!p.texts("compare").empty() && p.text("measured_file").empty())
    throw std::invalid_argument("compare is set but measured_file is empty; name the run's results.jsonl");
}

class Accounting : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    check_compare(p);
    const std::string& q = p.text("quantity");
    runner::Record r = q == "attention_memory" ? attention_memory(p)
                       : q == "kernel_flops"   ? kernel_flops(ctx, p)
                       : q == "bucket_overhead" ? bucket_overhead(ctx, p)
                                                : optimizer_memory(ctx, p);
    add_measured(p, r);
    out.emit(std::move(r));
  }
};

// Which points record each (a point without one is invalid): a quantity's analytic
// metrics at its points; "?": what a measured_file's compare entries add.
std::vector<std::string> declared_metrics() {
  std::vector<std::string> out{"derivation if quantity!=optimizer_memory", "fits_device if quantity=attention_memory",
                               "communication if quantity=optimizer_memory", "measured_status if measured_file!="};
  for (const auto& [quantity, names] : analytic_metrics())
    for (const auto& n : names) {
      out.push_back(n + " if quantity=" + quantity);
      for (const char* prefix : {"measured_", "diff_"}) out.push_back(prefix + n + "?");
    }
  for (const auto& [quantity, names] : analytic_metrics())
    for (const auto& n : names) out.push_back("diff_" + n + "_pct?");
  return out;
}

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "accounting";
  m.version = "1";
  m.description = "analytic memory, FLOPs, bucket overhead and optimizer sharding of the measured runs, beside the measurements";
  m.options = {
      runner::opt_enum("quantity", {"attention_memory", "kernel_flops", "bucket_overhead", "optimizer_memory"},
                       "attention_memory", "which analytic answer this point computes"),
      runner::opt_plugin("model", runner::PluginKind::Model, "none",
                         "kernel_flops, bucket_overhead, optimizer_memory: the model whose declared facts "
                         "(sizes, parameters) the formulas use, e.g. {name: transformer_lm, size: xl}"),
      runner::opt_int("batch_size", 8, "batch (sequences)").in_range(1, 1e9),
      runner::opt_int("seq", 1024, "attention_memory: sequence length").in_range(1, 1 << 24),
      runner::opt_int("d_head", 64, "attention_memory: head dimension").in_range(1, 1 << 16),
      runner::opt_int("dtype_bytes", 4, "attention_memory: bytes per element").in_range(1, 8),
      runner::opt_float("device_memory_gib", 79.19, "attention_memory: memory the device gives (GiB)").at_least(0),
      runner::opt_float("softmax_flops_per_element", 5.0, "kernel_flops: FLOPs per score element of softmax").at_least(0),
      runner::opt_float("gradient_bytes", 4.0, "bucket_overhead: bytes per gradient element").at_least(0.125),
      runner::opt_float("bucket_mb", 25.0, "bucket_overhead: bucket size (MB, 1e6 B)").at_least(1e-6),
      runner::opt_float("bandwidth_gbps", 100.0, "bucket_overhead: all-reduce bandwidth w without fit_file (GB/s)").at_least(1e-9),
      runner::opt_float("call_overhead_ms", 0.05, "bucket_overhead: per-call overhead o without fit_file (ms)").at_least(1e-9),
      runner::opt_string("fit_file", "", "bucket_overhead: all-reduce results.jsonl to fit o and w to (time = o + bytes / w)"),
      runner::opt_string("fit_part", "", "bucket_overhead: part of fit_file"),
      runner::opt_list("fit_where", runner::OptionType::StringList, runner::Value::List{},
                       "bucket_overhead: key=value conditions on fit_file's records"),
      runner::opt_enum("scheme", {"adamw", "sharded", "zero1", "zero1_mixed"}, "adamw",
                       "optimizer_memory: unsharded AdamW, our sharded optimizer, ZeRO-1 (fp32), ZeRO-1 (fp16 + fp32 master)"),
      runner::opt_int("world_size", 2, "optimizer_memory: ranks").in_range(1, 1 << 20),
      runner::opt_string("measured_file", "", "results.jsonl of the measured run (relative to the working directory)"),
      runner::opt_string("measured_part", "", "part of measured_file; empty = any"),
      runner::opt_list("measured_where", runner::OptionType::StringList, runner::Value::List{},
                       "key=value conditions on the measured record; {option} takes this point's value; key= absent"),
      runner::opt_list("compare", runner::OptionType::StringList, runner::Value::List{},
                       "analytic_metric=measured_metric pairs shown side by side with the difference"),
      runner::opt_enum("measured_stat", {"median", "mean", "min", "max"}, "median", "statistic of measured stats"),
  };
  m.metrics = declared_metrics();
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<Accounting>();
  };
  // Bad selections fail before anything runs, with the file, the option and the fix.
  m.preflight = [](const runner::Params& p) {
    check_compare(p);
    if (!p.text("measured_file").empty()) {
      const MeasuredRecord r = find_measured(selection(p, "measured_file", "measured_part", "measured_where"),
                                             p.text("measured_stat"));
      for (const std::string& entry : p.texts("compare")) {
        const std::string theirs = entry.substr(entry.find('=') + 1);
        if (r.status == runner::RecordStatus::ok && r.numbers.count(theirs) == 0) {
          std::string names;
          for (const auto& [k, v] : r.numbers) names += (names.empty() ? "" : ", ") + k;
          throw std::invalid_argument("measured_file '" + p.text("measured_file") + "': the matched record has no numeric metric '" +
                                      theirs + "' (compare entry '" + entry + "'); it has: " + names);
        }
      }
    }
    if (p.text("quantity") == "bucket_overhead" && !p.text("fit_file").empty()) {
      std::string source;
      overhead_and_bandwidth(p, source);
    }
  };
  return m;
}

}  // namespace
}  // namespace plugins::accounting

RUNNER_PLUGIN(plugins::accounting::make_manifest)
