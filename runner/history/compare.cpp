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

CompareRow compare_metric(const MetricValue& a, const MetricValue& b, const CompareOptions& o) {
  CompareRow row;
  row.unit = b.unit.empty() ? a.unit : b.unit;
  row.a = a.center;
  row.b = b.center;
  row.n_a = a.samples.empty() ? a.n : static_cast<std::int64_t>(a.samples.size());
  row.n_b = b.samples.empty() ? b.n : static_cast<std::int64_t>(b.samples.size());
  row.ratio = a.center != 0 ? b.center / a.center : (b.center == 0 ? 1.0 : INFINITY);
  if (a.samples.size() >= 2 && b.samples.size() >= 2) {
    const UTest u = mann_whitney_u(a.samples, b.samples);
    row.p_value = u.p_value;
    row.test = u.exact ? "U exact" : "U";
  } else if (a.n >= 2 && b.n >= 2) {
    // Records without samples (older runs): Welch's t on mean, std and n, with
    // Student's tail; a normal tail would claim p = 1e-22 from three steps.
    row.p_value = welch_t_p(a.mean, a.std, static_cast<double>(a.n), b.mean, b.std, static_cast<double>(b.n));
    row.test = "t (no samples)";
  } else {
    row.test = "-";
  }
  const int better = better_direction(row.unit);
  if (std::fabs(row.ratio - 1) <= o.threshold || (a.center == 0 && b.center == 0)) {
    row.verdict = "same";
  } else if (row.p_value >= 0 && row.p_value >= o.alpha) {
    row.verdict = "noisy";
  } else {
    row.verdict = direction_word(better, row.ratio, row.unit);
    row.regression = row.verdict == "slower" || row.verdict == "larger";
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

bool Comparison::regression() const {
  return std::any_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.regression; });
}

int better_direction(const std::string& unit) {
  if (unit.find("/s") != std::string::npos) return +1;
  static const std::set<std::string> lower = {"ms", "s", "us", "ns", "bytes", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB"};
  return lower.count(unit) ? -1 : 0;
}

bool is_relative_query(const std::string& spec) { return spec == "last" || spec == "last-good"; }

Side resolve_side(const std::string& spec, HistoryStore* store, const Side* context, const std::string& experiment) {
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
    f.limit = 1;
    f.experiment = experiment;
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
    auto runs = need_store().runs(f);
    if (runs.empty())
      throw std::runtime_error("no " + std::string(f.good_only ? "good " : "") + "finished run of " + f.experiment +
                               (f.device_name.empty() ? "" : " on " + f.device_name) + " in " + store->file().string());
    side = side_from_runs(runs, *store);
  } else {
    throw std::runtime_error("'" + spec + "': not a run directory, run:ID, a commit, last or last-good");
  }
  side.spec = spec;
  for (const RunInfo& r : side.runs) side.description += (side.description.empty() ? "" : "; ") + describe(r);
  return side;
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
  // Parameters the user changed on purpose (--ignore-param) do not tell points apart.
  if (!o.ignore_params.empty())
    for (Side* side : {&a, &b})
      for (auto& r : side->records) {
        for (const auto& k : o.ignore_params) r.params.erase(k);
        r.key = point_key(r.part, r.params, r.labels);
      }
  std::vector<const HistoryRecord*> all;
  std::vector<std::string> ids;  // experiment and point key of all[i]
  all.reserve(a.records.size() + b.records.size());
  ids.reserve(all.capacity());
  std::set<std::string> experiments;
  for (const auto* side : {&a, &b})
    for (const auto& r : side->records) {
      all.push_back(&r);
      ids.push_back(r.experiment + "\n" + r.key);
      experiments.insert(r.experiment);
    }
  const auto labels = point_labels(all, ids, experiments.size() > 1);
  const size_t n_a = a.records.size();
  std::unordered_map<std::string_view, size_t> in_a;
  in_a.reserve(n_a);
  for (size_t i = 0; i < n_a; ++i) in_a.emplace(ids[i], i);
  std::vector<bool> seen(n_a, false);
  const std::set<std::string> wanted(o.metrics.begin(), o.metrics.end());
  c.rows.reserve(b.records.size() * (wanted.empty() ? 2 : wanted.size()));
  for (size_t j = 0; j < b.records.size(); ++j) {
    const HistoryRecord& rb = b.records[j];
    const std::string_view id = ids[n_a + j];
    const auto it = in_a.find(id);
    if (it == in_a.end()) {
      c.only_in_b.push_back(labels.at(id));
      continue;
    }
    seen[it->second] = true;
    const HistoryRecord& ra = a.records[it->second];
    const std::string& label = labels.at(id);
    if (failed(ra) || failed(rb)) {
      CompareRow row;
      row.experiment = rb.experiment;
      row.point = label;
      row.metric = "status";
      row.test = "-";
      row.verdict = failed(rb) ? (failed(ra) ? "still-failing" : "failed") : "fixed";
      row.regression = row.verdict == "failed";
      if (row.verdict == "failed") row.unit = rb.status;
      c.rows.push_back(row);
      continue;
    }
    for (const auto& [name, mb] : rb.metrics) {
      if (!wanted.empty() && !wanted.count(name)) continue;
      const auto ma = ra.metrics.find(name);
      if (ma == ra.metrics.end()) continue;
      CompareRow row = compare_metric(ma->second, mb, o);
      row.experiment = rb.experiment;
      row.point = label;
      row.metric = name;
      c.rows.push_back(std::move(row));
    }
  }
  for (size_t i = 0; i < n_a; ++i)
    if (!seen[i]) c.only_in_a.push_back(labels.at(ids[i]));
  c.a = std::move(a);
  c.b = std::move(b);
  return c;
}

}  // namespace runner::history
