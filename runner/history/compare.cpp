#include "history/compare.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "history/mann_whitney.hpp"
#include "history/verdict_stats.hpp"

namespace runner::history {
namespace fs = std::filesystem;

namespace {

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Human names for points: the part, the parameters that differ between points
// of that part (across both sides), and the labels. `ids[i]` identifies all[i]
// (experiment and point key); both sides mostly share their points, so each
// distinct point is looked at once.
std::unordered_map<std::string_view, std::string> point_labels(const std::vector<const HistoryRecord*>& all,
                                                               const std::vector<std::string>& ids,
                                                               bool with_experiment) {
  std::unordered_map<std::string_view, std::string> out;
  out.reserve(all.size());
  std::vector<const HistoryRecord*> distinct;
  for (size_t i = 0; i < all.size(); ++i)
    if (out.emplace(ids[i], std::string()).second) distinct.push_back(all[i]);
  std::map<std::string, std::map<std::string, std::set<std::string>>> values;  // part -> key -> values
  for (const auto* r : distinct)
    for (const auto& [k, v] : r->params.items())
      if (k != "device" && k.rfind("measure.", 0) != 0) values[r->experiment + "/" + r->part][k].insert(v.dump());
  for (size_t i = 0; i < all.size(); ++i) {
    std::string& label = out[ids[i]];
    if (!label.empty()) continue;
    const HistoryRecord* r = all[i];
    label = with_experiment ? r->experiment + "/" + r->part : r->part;
    const auto& varying = values[r->experiment + "/" + r->part];
    for (const auto& [k, v] : r->params.items())
      if (auto it = varying.find(k); it != varying.end() && it->second.size() > 1) label += " " + k + "=" + value_text(v);
    for (const auto& [k, v] : r->labels.items()) label += " " + k + "=" + value_text(v);
  }
  return out;
}

// The key points match on: the identity, with the ignored parameters taken out
// and without the device under --cross-device.
std::string match_id(const HistoryRecord& r, const CompareOptions& o) {
  if (o.ignore_params.empty()) return point_identity(r, !o.cross_device);
  HistoryRecord copy;
  copy.experiment = r.experiment;
  copy.device_name = r.device_name;
  copy.driver = r.driver;
  nlohmann::json params = r.params;
  for (const auto& k : o.ignore_params) params.erase(k);
  copy.key = point_key(r.part, params, r.labels);
  return point_identity(copy, !o.cross_device);
}

bool failed(const HistoryRecord& r) {
  const RecordStatus status = status_named(r.status);
  return status == RecordStatus::error || status == RecordStatus::oom;
}

std::string direction_word(int better, double ratio, const std::string& unit) {
  const bool up = ratio > 1;
  if (better == 0) return up ? "higher" : "lower";
  static const std::set<std::string> sizes = {"bytes", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB"};
  const bool bytes = sizes.count(unit) > 0;
  const bool improved = (better > 0) == up;
  if (bytes) return improved ? "smaller" : "larger";
  return improved ? "faster" : "slower";
}

}  // namespace

namespace {

bool time_unit(const std::string& unit) { return unit == "ms" || unit == "s" || unit == "us" || unit == "ns"; }
bool byte_unit(const std::string& unit) {
  static const std::set<std::string> sizes = {"bytes", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB"};
  return sizes.count(unit) > 0;
}

double in_ms(double v, const std::string& unit) {
  return unit == "s" ? v * 1e3 : unit == "us" ? v * 1e-3 : unit == "ns" ? v * 1e-6 : v;
}

// t with `df` degrees of freedom whose two-sided tail is `p` (bisection).
double t_quantile(double p, double df) {
  double lo = 0, hi = 1e3;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_two_sided(mid, df) > p ? lo : hi) = mid;
  }
  return hi;
}

double log_mean(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m += std::log(v);
  return m / x.size();
}

double log_sd(const std::vector<double>& x) {
  const double m = log_mean(x);
  double ss = 0;
  for (double v : x) ss += (std::log(v) - m) * (std::log(v) - m);
  return std::sqrt(ss / (x.size() - 1));
}

// The smallest two-sided p of an exact U test of sizes m and n: 2 / C(m+n, m).
double u_exact_floor(size_t m, size_t n) {
  double c = 1;
  for (size_t i = 1; i <= std::min(m, n); ++i) c = c * static_cast<double>(m + n - std::min(m, n) + i) / static_cast<double>(i);
  return std::min(1.0, 2 / c);
}

bool positive(const std::vector<double>& x) {
  return std::all_of(x.begin(), x.end(), [](double v) { return v > 0; });
}

std::string plural(std::int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// What a test over rounds reads: each round's best step where the rounds
// kept them, else the rounds' medians.
const std::vector<double>& tested_rounds(const MetricValue& m) {
  return m.round_best.size() == m.samples.size() ? m.round_best : m.samples;
}

// A row tested over interleaved rounds, with the values it was tested on.
struct RoundRow {
  size_t row;
  const MetricValue *a, *b;
};

// Each point's variance of its rounds' logs is a guess from 3 values a side;
// the compare's other points of the metric ran on the same machine in the same
// rounds, so empirical Bayes pools them (variance_prior), and each row is
// judged again by the moderated t. A metric with fewer than 3 such rows keeps
// its own t.
void moderate_rounds(std::vector<CompareRow>& rows, const std::vector<RoundRow>& over_rounds, const CompareOptions& o) {
  constexpr double kMostDf = 1000;  // Student's t is normal well before this
  std::map<std::string, std::vector<const RoundRow*>> by_metric;
  for (const RoundRow& r : over_rounds) by_metric[rows[r.row].metric].push_back(&r);
  for (const auto& [metric, group] : by_metric) {
    std::vector<double> var, df, shift, spread;  // spread: sqrt(1 / n_a + 1 / n_b)
    for (const RoundRow* r : group) {
      const std::vector<double>& xa = tested_rounds(*r->a), &xb = tested_rounds(*r->b);
      const double na = static_cast<double>(xa.size()), nb = static_cast<double>(xb.size());
      const double sa = log_sd(xa), sb = log_sd(xb);
      df.push_back(na + nb - 2);
      var.push_back((sa * sa * (na - 1) + sb * sb * (nb - 1)) / df.back());
      shift.push_back(log_mean(xb) - log_mean(xa));
      spread.push_back(std::sqrt(1 / na + 1 / nb));
    }
    const VariancePrior prior = variance_prior(var, df);
    if (!(prior.df > 0)) continue;
    for (size_t k = 0; k < group.size(); ++k) {
      CompareRow& row = rows[group[k]->row];
      const double own = df[k];
      const double v = std::isinf(prior.df) ? prior.var : (prior.df * prior.var + own * var[k]) / (prior.df + own);
      const double dof = std::min(prior.df + own, kMostDf);
      const double se = std::sqrt(v) * spread[k];
      row.p_value = se > 0 ? student_t_two_sided(shift[k] / se, dof) : (shift[k] == 0 ? 1 : 0);
      row.test = "moderated t over rounds";
      row.detectable = std::exp(t_quantile(o.alpha, dof) * se) - 1;
      if (row.note.find("weak test") != std::string::npos) row.note.clear();
      if (row.verdict == "same") continue;
      // The medians' ratio and the best steps' shift must agree on the way.
      const bool significant = row.p_value < o.alpha && (shift[k] > 0) == (row.ratio > 1);
      row.verdict = significant ? direction_word(better_direction(row.unit), row.ratio, row.unit) : "noisy";
      row.regression = row.gating && (row.verdict == "slower" || row.verdict == "larger");
    }
  }
}

}  // namespace

// Per-step samples need this many a side for the block bootstrap to mean
// anything; fewer fall back to the t tests.
constexpr size_t kBootstrapMinSteps = 8;

CompareRow compare_metric(const MetricValue& a, const MetricValue& b, const CompareOptions& o) {
  CompareRow row;
  row.unit = b.unit.empty() ? a.unit : b.unit;
  row.a = a.center;
  row.b = b.center;
  row.n_a = a.samples.empty() ? a.n : static_cast<std::int64_t>(a.samples.size());
  row.n_b = b.samples.empty() ? b.n : static_cast<std::int64_t>(b.samples.size());
  row.ratio = a.center != 0 ? b.center / a.center : (b.center == 0 ? 1.0 : INFINITY);
  const bool per_step = a.samples.size() == static_cast<size_t>(a.n) && b.samples.size() == static_cast<size_t>(b.n);
  const bool samples = a.samples.size() >= 2 && b.samples.size() >= 2 && positive(a.samples) && positive(b.samples);
  const std::int64_t fewest = std::min(row.n_a, row.n_b);
  const bool rounds = a.rounds > 0 && b.rounds > 0;
  if (samples && per_step && a.samples.size() >= kBootstrapMinSteps && b.samples.size() >= kBootstrapMinSteps) {
    const BootstrapResult r = block_bootstrap_log_ratio(a.samples, b.samples);
    row.p_value = r.p_value;
    row.test = "block bootstrap";
    row.detectable = std::exp(t_quantile(o.alpha, r.df) * r.spread) - 1;
  } else if (samples && per_step) {
    // A few steps: ranks, whose exact distribution has a floor that says
    // honestly how little so few steps can show.
    const UTest u = mann_whitney_u(a.samples, b.samples);
    row.p_value = u.p_value;
    row.test = u.exact ? "U exact" : "U";
    const double floor = u_exact_floor(a.samples.size(), b.samples.size());
    if (floor >= o.alpha)
      row.note = plural(fewest, "step") + ": cannot detect (smallest possible p " + std::to_string(floor).substr(0, 5) + ")";
  } else if (samples) {
    // Repetition means, or each interleaved round's best step: one value per
    // batch, close to independent. compare() pools the variance of rounds
    // across points.
    const std::vector<double>& xa = rounds ? tested_rounds(a) : a.samples;
    const std::vector<double>& xb = rounds ? tested_rounds(b) : b.samples;
    row.p_value = log_welch_p(xa, xb);
    row.test = rounds ? "t over rounds" : "t over repetitions";
    const double na = static_cast<double>(xa.size()), nb = static_cast<double>(xb.size());
    const double sa = log_sd(xa), sb = log_sd(xb);
    const double va = sa * sa / na, vb = sb * sb / nb;
    const double df = va + vb > 0 ? (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1)) : na + nb - 2;
    row.detectable = std::exp(t_quantile(o.alpha, df) * std::sqrt(va + vb)) - 1;
  } else if (a.n >= 2 && b.n >= 2) {
    // Records without samples (older runs): Welch's t on mean, std and n, with
    // Student's tail; a normal tail would claim p = 1e-22 from three steps.
    row.p_value = welch_t_p(a.mean, a.std, static_cast<double>(a.n), b.mean, b.std, static_cast<double>(b.n));
    row.test = "t (no samples)";
  } else {
    row.test = "-";
  }
  // Every value of B beyond every value of A by more than the threshold: a
  // change no noise of either side explains, whatever a test with few values
  // can prove (4x slower over 3 repetitions is slower, not noisy).
  // Three values a side at least, and a gap wider than either side's range:
  // two draws a side of one noisy distribution fall apart too often.
  // Not over rounds: there a slow spell of the machine moves a whole round,
  // and every round of one side beyond the other's happens to 1 in 20 A/A
  // pairs of 3 rounds (the moderated t judges them).
  const double factor = 1 + o.threshold;
  if (!rounds && a.n >= 3 && b.n >= 3 && a.min > 0 && b.min > 0) {
    const double range = std::max(a.max - a.min, b.max - b.min);
    row.separated = (b.min > a.max * factor && b.min - a.max > range) || (b.max * factor < a.min && a.min - b.max > range);
  }
  // Five steps a side: the fastest step of one side slower than the other's
  // median by more than the threshold. Timings have slow outliers (a step
  // preempted), never fast ones, so min and median survive what breaks a t
  // test over means; for one distribution of independent steps the chance is
  // below that of half of one side's steps all lying under every step of the
  // other (10 + 10 steps: 1.6 %). A whole run in a slower clock state shifts
  // every step alike: that drift is what the lookback below judges.
  if (!rounds && a.n >= 5 && b.n >= 5 && a.min > 0 && b.min > 0)
    row.separated = row.separated || b.min > a.center * factor || a.min > b.center * factor;
  if (row.test == "-" && (a.n >= 2 || b.n >= 2))
    row.note = plural(fewest, per_step || a.samples.empty() ? "step" : "repetition") + ": cannot detect (a test needs 2 a side)";
  else if (row.test == "t over repetitions" && fewest < 5)
    row.note = plural(fewest, "repetition") + ": weak test (5 or more detect small changes)";
  else if (rounds && fewest < 5)
    row.note = plural(fewest, "round") + ": weak test (5 or more detect small changes)";
  const int better = better_direction(row.unit);
  if (std::fabs(row.ratio - 1) <= o.threshold || (a.center == 0 && b.center == 0)) {
    row.verdict = "same";
  } else if (row.separated || (row.p_value < 0 && a.n <= 1 && b.n <= 1) || (row.p_value >= 0 && row.p_value < o.alpha)) {
    row.verdict = direction_word(better, row.ratio, row.unit);
    row.regression = row.verdict == "slower" || row.verdict == "larger";
  } else {
    row.verdict = "noisy";
  }
  const auto constant = [](const MetricValue& m) {
    return m.std == 0 && std::all_of(m.samples.begin(), m.samples.end(), [&](double v) { return v == m.center; });
  };
  if (better == 0) row.hidden = "no direction";
  else if (a.center == b.center && constant(a) && constant(b)) row.hidden = "constant";
  return row;
}

bool shown(const CompareRow& r, const CompareOptions& o) {
  if (o.only_changed && r.verdict == "same") return false;
  return r.hidden.empty() || std::find(o.metrics.begin(), o.metrics.end(), r.metric) != o.metrics.end();
}

namespace {

Side side_from_run_dir(const fs::path& dir, HistoryStore* store) {
  Side side;
  nlohmann::json env;
  std::string experiment, started;
  for (const StoredRecord& stored : read_results_file(dir / "results.jsonl")) {
    if (env.is_null() && !stored.env.empty()) env = stored.env;
    HistoryRecord r = history_record(stored);
    if (started.empty()) started = r.time;
    if (!r.experiment.empty()) experiment = r.experiment;
    side.records.push_back(std::move(r));
  }
  if (side.records.empty())
    throw std::runtime_error((dir / "results.jsonl").string() + ": no records yet (the run recorded no point)");
  std::optional<RunInfo> run = store ? store->run_by_dir(dir) : std::nullopt;
  if (!run) {
    RunInfo r;
    r.experiment = experiment;
    r.run_dir = dir.string();
    r.started = started;
    auto text = [&](const char* k) { return env.contains(k) && env[k].is_string() ? env[k].get<std::string>() : std::string(); };
    r.git_commit = text("git_commit");
    r.device = text("device");
    r.device_name = text("gpu").empty() ? text("cpu") : text("gpu");
    r.driver = text("driver");
    r.cuda = text("cuda_runtime");
    r.libtorch = text("libtorch");
    r.host = text("host");
    run = r;
  }
  side.runs.push_back(*run);
  return side;
}

Side side_from_runs(std::vector<RunInfo> runs, HistoryStore& store) {
  Side side;
  for (const RunInfo& r : runs) {
    auto records = store.records(r.id);
    side.records.insert(side.records.end(), std::make_move_iterator(records.begin()),
                        std::make_move_iterator(records.end()));
  }
  side.runs = std::move(runs);
  return side;
}

std::string describe(const RunInfo& r) {
  std::string s = r.id ? "run " + std::to_string(r.id) + " " : std::string();
  s += "(" + r.experiment + ", commit " + (r.git_commit.empty() ? "?" : r.git_commit) + ", " + r.device_name + ", " +
       r.started + ")";
  return s;
}

}  // namespace

std::string primary_metric(const HistoryRecord& r) {
  std::string primary;
  double largest = -1;
  for (const auto& [name, m] : r.metrics)
    if (time_unit(m.unit) && m.n >= 2 && in_ms(m.center, m.unit) > largest) {
      largest = in_ms(m.center, m.unit);
      primary = name;
    }
  if (primary.empty())
    for (const auto& [name, m] : r.metrics)
      if (better_direction(m.unit) > 0 && m.n >= 2) return name;
  return primary;
}

bool Comparison::regression() const {
  return std::any_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.regression; });
}

int better_direction(const std::string& unit) {
  if (unit.find("/s") != std::string::npos) return +1;
  static const std::set<std::string> lower = {"ms", "s", "us", "ns", "bytes", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB"};
  return lower.count(unit) ? -1 : 0;
}

bool is_relative_query(const std::string& spec) { return spec == "last" || spec == "last-good"; }

Side resolve_side(const std::string& spec, HistoryStore* store, const Side* context, const std::string& experiment,
                  const CompareOptions& options) {
  auto need_store = [&]() -> HistoryStore& {
    if (!store) throw std::runtime_error("'" + spec + "' is a history query but the history is off");
    return *store;
  };
  Side side;
  static const std::regex run_id(R"(^(run:|#)?([0-9]{1,6})$)");
  static const std::regex commit(R"(^(commit:)?([0-9a-fA-F]{7,40})(-dirty)?$)");
  std::smatch m;
  if (fs::is_directory(spec)) {
    if (!fs::exists(fs::path(spec) / "results.jsonl"))
      throw std::runtime_error(spec + ": not a run directory (no results.jsonl)");
    side = side_from_run_dir(spec, store);
  } else if (std::regex_match(spec, m, run_id)) {
    auto run = need_store().run(std::stoll(m[2]));
    if (!run) throw std::runtime_error("no run " + std::string(m[2]) + " in " + store->file().string() + " (see `runner history`)");
    side = side_from_runs({*run}, *store);
  } else if (std::regex_match(spec, m, commit)) {
    RunFilter f;
    f.commit_prefix = m[2].str() + m[3].str();
    f.experiment = experiment;
    f.finished_only = true;
    if (context && !context->runs.empty()) f.device_name = context->runs.front().device_name;
    std::map<std::string, RunInfo> newest;  // per experiment
    for (const RunInfo& r : need_store().runs(f)) newest.emplace(r.experiment, r);
    if (newest.empty())
      throw std::runtime_error("no finished run at commit " + f.commit_prefix +
                               (f.device_name.empty() ? "" : " on " + f.device_name) + " in " + store->file().string());
    std::vector<RunInfo> runs;
    for (auto& [_, r] : newest) runs.push_back(r);
    side = side_from_runs(runs, *store);
  } else if (is_relative_query(spec)) {
    RunFilter f;
    f.finished_only = true;
    f.good_only = spec == "last-good";
    f.experiment = experiment;
    const bool per_point = context && !context->runs.empty() && !context->records.empty();
    if (context && !context->runs.empty()) {
      const RunInfo& other = context->runs.front();
      if (f.experiment.empty()) f.experiment = other.experiment;
      f.device_name = other.device_name;
      f.smoke = other.smoke;
      f.exclude_run = other.id;
      // A baseline is older than the run it judges (filtered in the query: the
      // newest run overall may be newer than it).
      f.started_before = other.started;
    }
    if (f.experiment.empty())
      throw std::runtime_error("'" + spec + "' needs an experiment: give --experiment or a run on the other side");
    if (!per_point) f.limit = 1;
    auto runs = need_store().runs(f);
    const std::string what = "finished run" + std::string(f.good_only ? " (without failed points or a regression)" : "") +
                             " of " + f.experiment + (f.device_name.empty() ? "" : " on " + f.device_name);
    if (runs.empty()) throw std::runtime_error("no " + what + " in " + store->file().string());
    if (!per_point) {
      side = side_from_runs(runs, *store);
    } else {
      // Per point: the newest run that has a point of the same identity, so a
      // --filter run or one with other overrides never stands in for the rest.
      std::unordered_set<std::string> wanted;
      for (const auto& r : context->records) wanted.insert(match_id(r, options));
      const size_t points = wanted.size();
      for (const RunInfo& run : runs) {
        if (wanted.empty()) break;
        bool used = false;
        for (HistoryRecord& r : store->records(run.id))
          if (wanted.erase(match_id(r, options))) {
            side.records.push_back(std::move(r));
            used = true;
          }
        if (used) side.runs.push_back(run);
      }
      if (side.records.empty())
        throw NothingComparable("nothing comparable: no earlier " + what + " has any of the " +
                                std::to_string(points) +
                                " point(s) of the other side (same parameters after overrides, device and driver)");
    }
  } else {
    throw std::runtime_error("'" + spec + "': not a run directory, run:ID, a commit, last or last-good");
  }
  side.spec = spec;
  for (const RunInfo& r : side.runs) side.description += (side.description.empty() ? "" : "; ") + describe(r);
  return side;
}

namespace {

std::string short_hash(const nlohmann::json& plugin) {
  const std::string sha = plugin.contains("sha256") && plugin["sha256"].is_string() ? plugin["sha256"].get<std::string>() : "";
  return sha.empty() ? "?" : sha.substr(0, 8);
}

std::string commit_of(const nlohmann::json& plugin) {
  return plugin.contains("commit") && plugin["commit"].is_string() ? plugin["commit"].get<std::string>() : "none";
}

// Which metrics of a point gate: the ones --metric names, else its primary
// metric (the largest time metric measured over steps: the whole step, not
// a phase of it; else the first rate) and memory values.
std::set<std::string> gating_metrics(const HistoryRecord& r, const CompareOptions& o, std::string& primary) {
  std::set<std::string> out;
  if (!o.metrics.empty()) {
    out.insert(o.metrics.begin(), o.metrics.end());
    return out;
  }
  primary = primary_metric(r);
  if (!primary.empty()) out.insert(primary);
  for (const auto& [name, m] : r.metrics)
    if (byte_unit(m.unit)) out.insert(name);
  return out;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fraction < 0.1 ? "%.1f%%" : "%.0f%%", fraction * 100);
  return buf;
}

}  // namespace

void add_lookback(CompareOptions& o, HistoryStore& store, const Side& b, int runs) {
  if (b.runs.empty() || !b.runs.front().id) return;
  const RunInfo& run = b.runs.front();
  RunFilter f;
  f.experiment = run.experiment;
  f.device_name = run.device_name;
  f.smoke = run.smoke;
  f.good_only = true;
  f.started_before = run.started;
  f.exclude_run = run.id;
  f.limit = runs;
  std::vector<RunInfo> earlier = store.runs(f);
  std::reverse(earlier.begin(), earlier.end());  // oldest first
  for (const RunInfo& r : earlier)
    for (const HistoryRecord& rec : store.records(r.id)) {
      if (failed(rec)) continue;
      const std::string primary = primary_metric(rec);
      if (primary.empty()) continue;
      o.lookback[match_id(rec, o) + "\n" + primary].push_back(rec.metrics.at(primary).center);
    }
}

void apply_ignore_params(Side& side, const std::vector<std::string>& names) {
  for (auto& r : side.records) {
    for (const auto& k : names) r.params.erase(k);
    r.key = point_key(r.part, r.params, r.labels);
  }
}

std::string verdict_counts(const Comparison& c) {
  std::map<std::string, int> verdicts;
  for (const auto& r : c.rows)
    if (r.hidden.empty()) ++verdicts[r.verdict];
  std::string counts;
  for (const auto& [v, n] : verdicts) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + v;
  if (!c.only_in_a.empty()) counts += (counts.empty() ? "" : ", ") + std::to_string(c.only_in_a.size()) + " only in baseline";
  if (!c.only_in_b.empty()) counts += (counts.empty() ? "" : ", ") + std::to_string(c.only_in_b.size()) + " new";
  return counts;
}

Comparison compare(Side a, Side b, const CompareOptions& o) {
  Comparison c;
  c.options = o;
  std::set<std::string> devices_a, devices_b;
  for (const auto& r : a.runs) devices_a.insert(r.device_name);
  for (const auto& r : b.runs) devices_b.insert(r.device_name);
  if (devices_a != devices_b) {
    auto names = [](const std::set<std::string>& d) {
      std::string out;
      for (const auto& n : d) out += (out.empty() ? "" : " and ") + (n.empty() ? std::string("an unrecorded device") : n);
      return out.empty() ? std::string("no device") : out;
    };
    const std::string msg = "A ran on " + names(devices_a) + ", B on " + names(devices_b);
    if (!o.cross_device) throw std::invalid_argument(msg + ": pass --cross-device to compare different devices");
    c.warnings.push_back(msg + ": ratios mix device and code changes");
  }
  // Parameters the user changed on purpose (--ignore-param) do not tell points
  // apart; a name no point has is a typo, not a no-op.
  if (!o.ignore_params.empty()) {
    std::set<std::string> known;
    for (const Side* side : {&a, &b})
      for (const auto& r : side->records)
        for (const auto& [k, v] : r.params.items()) known.insert(k);
    for (const auto& k : o.ignore_params)
      if (!known.count(k)) {
        std::string list;
        for (const auto& n : known)
          if (n != "device" && n.rfind("measure.", 0) != 0) list += (list.empty() ? "" : ", ") + n;
        throw std::invalid_argument("--ignore-param " + k + ": no point on either side has that parameter (they have: " +
                                    list + ")");
      }
    for (Side* side : {&a, &b}) apply_ignore_params(*side, o.ignore_params);
  }
  // Points match on their identity: the device model and driver of each
  // record's run stay in it even when ignore_params were taken out above.
  CompareOptions matching = o;
  matching.ignore_params.clear();
  std::vector<const HistoryRecord*> all;
  std::vector<std::string> ids;  // identity of all[i]
  all.reserve(a.records.size() + b.records.size());
  ids.reserve(all.capacity());
  std::set<std::string> experiments_a, experiments_b;
  for (const auto* side : {&a, &b})
    for (const auto& r : side->records) {
      all.push_back(&r);
      ids.push_back(match_id(r, matching));
      (side == &a ? experiments_a : experiments_b).insert(r.experiment);
    }
  std::set<std::string> experiments = experiments_a;
  experiments.insert(experiments_b.begin(), experiments_b.end());
  const auto labels = point_labels(all, ids, experiments.size() > 1);
  const size_t n_a = a.records.size();
  std::unordered_map<std::string_view, size_t> in_a;
  in_a.reserve(n_a);
  for (size_t i = 0; i < n_a; ++i) in_a.emplace(ids[i], i);
  std::vector<bool> seen(n_a, false);
  const std::set<std::string> wanted(o.metrics.begin(), o.metrics.end());
  c.rows.reserve(b.records.size() * (wanted.empty() ? 2 : wanted.size()));
  std::map<std::string, std::string> build_changes;  // plugin -> "old -> new"
  size_t matched = 0;
  std::vector<RoundRow> over_rounds;
  for (size_t j = 0; j < b.records.size(); ++j) {
    const HistoryRecord& rb = b.records[j];
    const std::string_view id = ids[n_a + j];
    const auto it = in_a.find(id);
    if (it == in_a.end()) {
      c.only_in_b.push_back(labels.at(id));
      continue;
    }
    ++matched;
    seen[it->second] = true;
    const HistoryRecord& ra = a.records[it->second];
    const std::string& label = labels.at(id);
    for (const auto& [name, pb] : rb.plugins.items())
      if (ra.plugins.contains(name) && short_hash(ra.plugins[name]) != short_hash(pb))
        build_changes[name] = "sha256 " + short_hash(ra.plugins[name]) + " -> " + short_hash(pb) + " (commit " +
                              commit_of(ra.plugins[name]) + " -> " + commit_of(pb) + ")";
    if (failed(ra) || failed(rb)) {
      CompareRow row;
      row.experiment = rb.experiment;
      row.point = label;
      row.identity = std::string(id);
      row.metric = "status";
      row.test = "-";
      row.gating = true;
      row.verdict = failed(rb) ? (failed(ra) ? "still-failing" : "failed") : "fixed";
      row.regression = row.verdict == "failed";
      if (row.verdict == "failed") row.unit = rb.status;
      c.rows.push_back(row);
      continue;
    }
    std::string primary;
    const std::set<std::string> gating = gating_metrics(rb, o, primary);
    for (const auto& [name, mb] : rb.metrics) {
      if (!wanted.empty() && !wanted.count(name)) continue;
      const auto ma = ra.metrics.find(name);
      if (ma == ra.metrics.end()) continue;
      CompareRow row;
      if (!primary.empty() && time_unit(rb.metrics.at(primary).unit) && mb.unit.find("/s") != std::string::npos) {
        // tokens/s, TFLOP/s, GB/s: the step time again, seen upside down.
        row.unit = mb.unit;
        row.a = ma->second.center;
        row.b = mb.center;
        row.ratio = row.a != 0 ? row.b / row.a : 1.0;
        row.test = "-";
        row.verdict = "derived";
        row.hidden = "derived";
        row.note = "from " + primary + ", not tested again";
      } else {
        row = compare_metric(ma->second, mb, o);
        row.gating = gating.count(name) > 0;
        if (!row.gating) row.regression = false;
        if (row.test == "t over rounds") over_rounds.push_back({c.rows.size(), &ma->second, &mb});
      }
      row.experiment = rb.experiment;
      row.point = label;
      row.identity = std::string(id);
      row.metric = name;
      c.rows.push_back(std::move(row));
    }
  }
  for (size_t i = 0; i < n_a; ++i)
    if (!seen[i]) c.only_in_a.push_back(labels.at(ids[i]));
  if (matched == 0 && (!a.records.empty() || !b.records.empty())) {
    std::string why;
    if (experiments_a != experiments_b)
      why = "A is experiment " + *experiments_a.begin() + ", B is " + (experiments_b.empty() ? "empty" : *experiments_b.begin());
    else
      why = "A's points (" + (c.only_in_a.empty() ? std::string("none") : c.only_in_a.front()) + ", ...) and B's (" +
            (c.only_in_b.empty() ? std::string("none") : c.only_in_b.front()) +
            ", ...) differ in parameters, device or driver; --ignore-param NAME for a knob changed on purpose";
    throw NothingComparable("nothing comparable: no point of B (" + std::to_string(b.records.size()) +
                            " records) has the identity of a point of A (" + std::to_string(a.records.size()) +
                            "): " + why);
  }
  moderate_rounds(c.rows, over_rounds, o);
  // Benjamini-Hochberg over the gating tests of every point: the expected
  // share of false alarms among flagged points stays below alpha.
  std::vector<size_t> tested;
  std::vector<double> p;
  for (size_t i = 0; i < c.rows.size(); ++i)
    if (c.rows[i].gating && c.rows[i].p_value >= 0) {
      tested.push_back(i);
      p.push_back(c.rows[i].p_value);
    }
  const std::vector<double> q = benjamini_hochberg(p);
  for (size_t k = 0; k < tested.size(); ++k) {
    CompareRow& row = c.rows[tested[k]];
    row.q_value = q[k];
    const bool directional = row.verdict != "same" && row.verdict != "noisy";
    if (directional && !row.separated && q[k] >= o.alpha) {
      row.verdict = "noisy";
      row.regression = false;
      if (row.note.empty())
        row.note = "p " + std::to_string(row.p_value).substr(0, 6) + " is not significant over " +
                   std::to_string(tested.size()) + " tested points (q " + std::to_string(q[k]).substr(0, 6) + ")";
    }
  }
  // The point's own history: a B within its usual run-to-run spread is noise.
  for (auto& row : c.rows) {
    if (!row.gating || row.verdict == "same" || row.verdict == "noisy" || row.metric == "status") continue;
    const auto it = o.lookback.find(row.identity + "\n" + row.metric);
    if (it == o.lookback.end() || it->second.size() < 3 || !(row.b > 0)) continue;
    double mean = 0, ss = 0;
    for (double v : it->second) mean += std::log(v);
    mean /= it->second.size();
    for (double v : it->second) ss += (std::log(v) - mean) * (std::log(v) - mean);
    const double sd = std::sqrt(ss / (it->second.size() - 1));
    const double z = sd > 0 ? std::fabs(std::log(row.b) - mean) / sd : INFINITY;
    if (z >= o.lookback_z) continue;
    row.verdict = "noisy";
    row.regression = false;
    char buf[128];
    std::snprintf(buf, sizeof buf, "within this point's history: z %.1f over %zu runs (spread %.1f%%)", z,
                  it->second.size(), (std::exp(sd) - 1) * 100);
    row.note = buf;
  }
  for (auto& row : c.rows)
    if (row.verdict == "noisy" && row.note.empty() && row.detectable > 0)
      row.note = row.test + " detects about " + percent(row.detectable) + " at this spread";
  for (const auto& [name, change] : build_changes) c.build_changes.push_back(name + ": " + change);
  c.a = std::move(a);
  c.b = std::move(b);
  return c;
}

}  // namespace runner::history
