// task/scaling_model: DDP step time and weak-scaling efficiency on N GPUs,
// predicted from committed records (a one-GPU step, an all-reduce sweep and,
// optionally, a DDP run that calibrates compute interference), optionally beside
// a measured multi-GPU step. The model is ddp_scaling.hpp; records are read with
// the record selection of runner/record_selection.hpp (shared with task/accounting), so selections,
// `{option}` substitution and their one-line errors are the same in both tasks.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runner/record_selection.hpp"
#include "ddp_scaling.hpp"
#include "runner/task.hpp"

namespace plugins::scaling_model {
namespace {

using runner::MeasuredRecord;
using Selection = runner::RecordSelection;

constexpr double kMiB = 1024.0 * 1024.0;

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

// `file_option`: the option naming the file, when the selection reads another's file.
Selection selection(const runner::Params& p, const std::string& prefix, const std::string& file_option = "") {
  Selection s;
  s.file = p.text(file_option.empty() ? prefix + "_file" : file_option);
  s.part = p.text(prefix + "_part");
  s.where = runner::parse_where(p.texts(prefix + "_where"), p.flatten(), prefix + "_where");
  return s;
}

double number(const MeasuredRecord& r, const Selection& s, const std::string& option, const char* metric) {
  const auto it = r.numbers.find(metric);
  if (r.status != runner::RecordStatus::ok || it == r.numbers.end())
    throw std::invalid_argument(option + " '" + s.file.string() + "': the selected record (status " + r.status_text +
                                ") has no metric " + metric + "; select a train_step record");
  return it->second;
}

StepTimes one_gpu_step(const runner::Params& p, double& parameters) {
  const Selection s = selection(p, "step");
  const MeasuredRecord r = runner::find_measured(s, "median");
  StepTimes t;
  t.step = number(r, s, "step_file", "step_ms") / 1e3;
  t.forward = number(r, s, "step_file", "forward_ms") / 1e3;
  t.backward = number(r, s, "step_file", "backward_ms") / 1e3;
  t.optimizer = number(r, s, "step_file", "optimizer_ms") / 1e3;
  parameters = number(r, s, "step_file", "parameters");
  return t;
}

// One alpha-beta fit per process count in fit_processes (fit_where + processes=<p>),
// read from fit_file, or from the fit_files entry at the same position when the
// counts were measured in separate runs (a 4-process run holds no 2-process rows).
AllReduceModel allreduce_model(const runner::Params& p, std::string& fits) {
  const std::vector<std::int64_t> counts = p.integers("fit_processes");
  const std::vector<std::string> files = p.texts("fit_files");
  if (!files.empty() && !p.text("fit_file").empty())
    throw std::invalid_argument("fit_file and fit_files are both set; name every run in fit_files, one per fit_processes "
                                "entry, and leave fit_file empty");
  if (!files.empty() && files.size() != counts.size())
    throw std::invalid_argument("fit_files has " + std::to_string(files.size()) + " files, fit_processes " +
                                std::to_string(counts.size()) + " counts; give one file per count, in the same order");
  const std::string option = files.empty() ? "fit_file" : "fit_files";  // which option errors name
  std::map<int, std::vector<std::pair<double, double>>> points;
  std::map<int, std::string> origin;  // the file each count was read from, for errors and the derivation
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const int ranks = static_cast<int>(counts[i]);
    Selection one = selection(p, "fit");
    if (!files.empty()) one.file = files[i];
    if (origin.count(ranks))
      throw std::invalid_argument("fit_processes lists " + std::to_string(ranks) + " twice; give each process count once");
    origin[ranks] = one.file.string();
    one.where.emplace_back("processes", std::to_string(ranks));
    for (const MeasuredRecord& r : runner::find_all_measured(one, "median")) {
      if (r.status != runner::RecordStatus::ok) continue;
      const auto bytes = r.numbers.find("bytes"), time = r.numbers.find("time_ms");
      if (bytes == r.numbers.end() || time == r.numbers.end())
        throw std::invalid_argument(option + " '" + one.file.string() +
                                    "': records need the metrics bytes and time_ms (an allreduce_bench run)");
      points[ranks].emplace_back(bytes->second, time->second / 1e3);
    }
  }
  AllReduceModel m;
  m.gpus_per_node = static_cast<int>(p.integer("gpus_per_node"));
  m.network = {p.number("network_latency_us") / 1e6, p.number("network_busbw_gbps") * 1e9};
  for (const auto& [ranks, xy] : points) {
    const AlphaBeta f = fit_relative(xy);
    if (xy.size() < 2 || f.alpha <= 0 || f.beta <= 0)
      throw std::invalid_argument(option + " '" + origin[ranks] + "': the " + std::to_string(xy.size()) +
                                  " all-reduce sizes at " + std::to_string(ranks) +
                                  " ranks give no positive alpha and beta; select one backend over several sizes (fit_where)");
    if (ranks < 2 || ranks > m.gpus_per_node) continue;  // a fit describes ranks within one node
    m.measured[ranks] = link_from_fit(f, ranks);
    fits += (fits.empty() ? "" : "; ") + std::to_string(ranks) + " ranks: alpha " + fixed(f.alpha * 1e6, 1) +
            " us, busbw " + fixed(ring_factor(ranks) / f.beta / 1e9, 1) + " GB/s (" + std::to_string(xy.size()) +
            " sizes" + (files.empty() ? std::string() : ", " + origin[ranks]) + ")";
  }
  if (m.measured.empty())
    throw std::invalid_argument(option + " '" + (files.empty() ? p.text("fit_file") : files.front()) +
                                "': no process count between 2 and gpus_per_node (" + std::to_string(m.gpus_per_node) +
                                ") among the selected records; check fit_where");
  return m;
}

TransformerShape shape(runner::Context& ctx, const runner::Params& p, const runner::Params& model) {
  const auto facts = ctx.facts(runner::PluginKind::Model, model);
  auto fact = [&](const char* key) {
    const auto it = facts.find(key);
    if (it == facts.end())
      throw runner::SkipPoint("scaling_model: model '" + model.plugin_name() + "' declares no " + key);
    return it->second;
  };
  TransformerShape s;
  s.d_model = fact("d_model");
  s.d_ff = fact("d_ff");
  s.layers = fact("num_layers");
  s.vocab = fact("vocab_size");
  s.context = fact("context_length");
  s.batch = static_cast<double>(p.integer("batch_size"));
  if (s.parameters() != fact("parameters"))
    throw runner::SkipPoint("scaling_model: model '" + model.plugin_name() +
                            "' is not transformer_lm's parameter layout (its parameter count differs)");
  return s;
}

// kappa from the calibration run alone: its DDP backward, its own one-GPU backward
// (calibration_baseline_*), its model's buckets at calibration_bucket_mb.
double interference(runner::Context& ctx, const runner::Params& p, const AllReduceModel& net, std::string& source) {
  const std::string& mode = p.text("interference");
  if (mode == "none") {
    source = "none";
    return 0;
  }
  if (mode == "given") {
    source = "given";
    return p.number("interference_ms_per_gb") / 1e12;
  }
  const Selection s = selection(p, "calibration");
  const MeasuredRecord r = runner::find_measured(s, "median");
  const double backward = number(r, s, "calibration_file", "backward_ms") / 1e3;
  const int ranks = static_cast<int>(number(r, s, "calibration_file", "world_size"));
  const Selection base = selection(p, "calibration_baseline", "calibration_file");
  const MeasuredRecord one = runner::find_measured(base, "median");
  const double backward_1 = number(one, base, "calibration_file", "backward_ms") / 1e3;
  const bool own_model = p.plugin("calibration_model").plugin_name() == "none";
  const TransformerShape shape_c = shape(ctx, p, own_model ? p.plugin("model") : p.plugin("calibration_model"));
  for (const MeasuredRecord* m : {&r, &one})
    if (number(*m, s, "calibration_file", "parameters") != shape_c.parameters())
      throw std::invalid_argument("calibration_file '" + s.file.string() + "': its records have " +
                                  fixed(number(*m, s, "calibration_file", "parameters"), 0) +
                                  " parameters, the calibration model " + fixed(shape_c.parameters(), 0) +
                                  "; set calibration_model to the model that run trained");
  const auto buckets = pack_buckets(transformer_gradients(shape_c, p.number("gradient_bytes")),
                                    p.number("calibration_bucket_mb") * kMiB);
  source = "calibrated on " + std::to_string(ranks) + " ranks, " + fixed(p.number("calibration_bucket_mb"), 0) +
           " MiB buckets";
  return calibrate_interference(buckets, net, ranks, backward_1, backward);
}

void add_measured(const runner::Params& p, double predicted_step, runner::Record& r) {
  if (p.text("measured_file").empty()) return;
  const Selection s = selection(p, "measured");
  const MeasuredRecord m = runner::find_measured(s, "median");
  const double step = number(m, s, "measured_file", "step_ms");
  r.add("measured_step_ms", step, "ms");
  r.add("step_error_pct", 100 * (predicted_step * 1e3 - step) / step, "%");
  r.add("measured_backward_ms", number(m, s, "measured_file", "backward_ms"), "ms");
  r.add("measured_exposed_comm_ms", number(m, s, "measured_file", "communication_ms"), "ms");
  const auto buckets = m.numbers.find("buckets");
  if (buckets != m.numbers.end()) r.add("measured_buckets", buckets->second, "count");
}

class ScalingModel : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    const TransformerShape s = shape(ctx, p, p.plugin("model"));
    double parameters = 0;
    const StepTimes one = one_gpu_step(p, parameters);
    if (parameters != s.parameters())
      throw std::invalid_argument("step_file '" + p.text("step_file") + "': the selected step has " +
                                  fixed(parameters, 0) + " parameters, model " + p.plugin("model").plugin_name() +
                                  " has " + fixed(s.parameters(), 0) + "; select the same model size (step_where)");
    std::string fits, source;
    const AllReduceModel net = allreduce_model(p, fits);
    const double kappa = interference(ctx, p, net, source);
    const auto buckets = pack_buckets(transformer_gradients(s, p.number("gradient_bytes")), p.number("bucket_mb") * kMiB);
    const int n = static_cast<int>(p.integer("gpus"));
    const Prediction pr = predict(one, buckets, net, n, kappa);
    const Link link = n > 1 ? net.link(n) : Link{};  // one GPU communicates nothing

    runner::Record r;
    r.add("step_ms", pr.step * 1e3, "ms");
    r.add("efficiency", pr.efficiency, "fraction");
    r.add("one_gpu_step_ms", one.step * 1e3, "ms");
    r.add("backward_ms", pr.backward * 1e3, "ms");
    r.add("one_gpu_backward_ms", one.backward * 1e3, "ms");
    r.add("backward_share", one.backward / one.step, "fraction");
    r.add("exposed_comm_ms", pr.exposed * 1e3, "ms");
    r.add("allreduce_ms", pr.allreduce * 1e3, "ms");
    r.add("allreduce_beside_backward_ms", pr.beside * 1e3, "ms");
    r.add("buckets", static_cast<double>(buckets.size()), "count");
    r.add("gradient_mb", s.parameters() * p.number("gradient_bytes") / 1e6, "MB");
    r.add("nodes", static_cast<double>(net.nodes(n)), "count");
    if (n > 1) {
      r.add("alpha_us", link.alpha * 1e6, "us");
      r.add("busbw_gbps", link.busbw / 1e9, "GB/s");
    }
    r.add("interference_ms_per_gb", kappa * 1e3 * 1e9, "ms/GB");
    r.add("traffic_beside_backward_gb", pr.beside_bytes / 1e9, "GB");
    r.add_text("interconnect", n <= 1 ? "none" : net.nodes(n) == 1 ? "NVLink" : "NVLink + " + p.text("network"));
    r.add_text("interference_source", source);
    r.add_text("derivation", "fits: " + fits + "; " + std::to_string(n) + " ranks use " +
                                 std::to_string(net.source_count(n)) + "-rank fit" +
                                 (net.nodes(n) > 1 ? " + " + p.text("network") : std::string()) + "; kappa " +
                                 fixed(kappa * 1e12, 3) + " ms/GB (" + source + ")");
    add_measured(p, pr.step, r);
    out.emit(std::move(r));
  }
};

runner::OptionSpec list(const std::string& name, const std::string& help) {
  return runner::opt_list(name, runner::OptionType::StringList, runner::Value::List{}, help);
}

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "scaling_model";
  m.version = "1";
  m.description = "DDP step time and weak-scaling efficiency on N GPUs from a measured one-GPU step and all-reduce fits";
  m.options = {
      runner::opt_plugin("model", runner::PluginKind::Model, "transformer_lm",
                         "the model (transformer_lm's facts and parameter layout), e.g. {name: transformer_lm, size: xl}"),
      runner::opt_int("batch_size", 4, "sequences per GPU (weak scaling)").in_range(1, 1e9),
      runner::opt_int("gpus", 2, "data-parallel ranks N").in_range(1, 1 << 20),
      runner::opt_int("gpus_per_node", 8, "GPUs joined by NVLink in one node").in_range(1, 1024),
      runner::opt_float("gradient_bytes", 4.0, "bytes per gradient element").at_least(0.125),
      runner::opt_float("bucket_mb", 25.0, "bucket cap in MiB, as ddp/bucketed's bucket_size_mb").at_least(1e-6),
      runner::opt_string("step_file", "", "results.jsonl of the one-GPU train_step run"),
      runner::opt_string("step_part", "", "part of step_file"),
      list("step_where", "key=value conditions picking one train_step record ({option} substituted; key= absent)"),
      runner::opt_string("fit_file", "", "results.jsonl of an allreduce_bench run (bytes, time_ms, world_size)"),
      list("fit_files", "instead of fit_file: one allreduce_bench results.jsonl per fit_processes entry, in its order "
                        "(counts measured in separate runs)"),
      runner::opt_string("fit_part", "", "part of fit_file (of each of fit_files)"),
      list("fit_where", "key=value conditions on fit_file's records (one backend and implementation, every size)"),
      runner::opt_list("fit_processes", runner::OptionType::IntList, runner::Value::List{std::int64_t{2}},
                       "process counts to fit, each from the records with label processes=<p>"),
      runner::opt_string("network", "InfiniBand NDR, one 400 Gb/s NIC per GPU (line rate)", "the network between nodes (a label)"),
      runner::opt_float("network_busbw_gbps", 50.0, "all-reduce bus bandwidth per GPU across nodes (GB/s)").at_least(1e-6),
      runner::opt_float("network_latency_us", 5.0, "latency per tree level across nodes (us)").at_least(0),
      runner::opt_enum("interference", {"none", "given", "calibrated"}, "none",
                       "backward slowdown per byte all-reduced beside it: 0, interference_ms_per_gb, or fitted to "
                       "the calibration run"),
      runner::opt_float("interference_ms_per_gb", 0.0,
                       "interference: given: kappa, ms of backward per GB all-reduced beside it").at_least(0),
      runner::opt_string("calibration_file", "", "interference: calibrated: a DDP train_step run's results.jsonl"),
      runner::opt_string("calibration_part", "", "part of calibration_file"),
      list("calibration_where", "key=value conditions picking the calibration record (a DDP train_step)"),
      runner::opt_string("calibration_baseline_part", "", "part of calibration_file holding that run's one-GPU step"),
      list("calibration_baseline_where", "key=value conditions picking that run's one-GPU step"),
      runner::opt_plugin("calibration_model", runner::PluginKind::Model, "none",
                         "the model the calibration run trained (none: this point's model)"),
      runner::opt_float("calibration_bucket_mb", 100.0, "bucket cap (MiB) of the calibration record").at_least(1e-6),
      runner::opt_string("measured_file", "", "results.jsonl of a measured DDP run at this point's gpus (optional)"),
      runner::opt_string("measured_part", "", "part of measured_file"),
      list("measured_where", "key=value conditions picking the measured record"),
  };
  // "?": the link only across 2+ ranks, measured_buckets where the measured run has it.
  m.metrics = {"step_ms", "efficiency", "one_gpu_step_ms", "backward_ms", "one_gpu_backward_ms", "backward_share",
               "exposed_comm_ms", "allreduce_ms", "allreduce_beside_backward_ms", "buckets", "gradient_mb", "nodes",
               "alpha_us?", "busbw_gbps?", "interference_ms_per_gb", "traffic_beside_backward_gb", "interconnect",
               "interference_source", "derivation", "measured_step_ms if measured_file!=",
               "step_error_pct if measured_file!=", "measured_backward_ms if measured_file!=",
               "measured_exposed_comm_ms if measured_file!=", "measured_buckets?"};
  m.labels = std::vector<std::string>{};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<ScalingModel>();
  };
  // Selections that match nothing fail before anything runs, with the file, option and fix.
  m.preflight = [](const runner::Params& p) {
    if (p.text("step_file").empty())
      throw std::invalid_argument("step_file is empty; name the committed results.jsonl (see the README)");
    if (p.text("fit_file").empty() && p.texts("fit_files").empty())
      throw std::invalid_argument("fit_file is empty; name the committed results.jsonl (see the README), or one per "
                                  "fit_processes entry in fit_files");
    double parameters = 0;
    one_gpu_step(p, parameters);
    std::string fits;
    allreduce_model(p, fits);
    if (p.text("interference") == "calibrated") {
      if (p.text("calibration_file").empty())
        throw std::invalid_argument("interference: calibrated needs calibration_file (a DDP run's results.jsonl)");
      const Selection s = selection(p, "calibration");
      runner::find_measured(s, "median");
      runner::find_measured(selection(p, "calibration_baseline", "calibration_file"), "median");
    }
    if (!p.text("measured_file").empty()) runner::find_measured(selection(p, "measured"), "median");
  };
  return m;
}

}  // namespace
}  // namespace plugins::scaling_model

RUNNER_PLUGIN(plugins::scaling_model::make_manifest)
