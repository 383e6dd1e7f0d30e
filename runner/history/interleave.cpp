#include "history/interleave.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace runner::history {

std::string interleaved_order(int rounds) {
  std::string order;
  for (int i = 0; i < rounds; ++i) order += i % 2 ? "BA" : "AB";
  return order;
}

namespace {

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

// As compare judges a failed point.
bool failed(const HistoryRecord& r) {
  const RecordStatus status = status_named(r.status);
  return status == RecordStatus::error || status == RecordStatus::oom;
}

}  // namespace

Side merge_rounds(const std::vector<Side>& rounds, const std::string& spec) {
  Side out;
  out.spec = spec;
  if (rounds.empty()) return out;
  // Records of each round by identity, in the first round's order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const HistoryRecord*>> by_id;
  for (const Side& round : rounds)
    for (const HistoryRecord& r : round.records) {
      auto& list = by_id[point_identity(r)];
      if (list.empty() && &round == &rounds.front()) order.push_back(point_identity(r));
      list.push_back(&r);
    }
  for (const std::string& id : order) {
    const auto& list = by_id[id];
    if (list.size() != rounds.size()) continue;
    HistoryRecord merged = *list.front();
    for (const HistoryRecord* r : list)
      if (failed(*r)) merged = *r;
    if (failed(merged)) {
      out.records.push_back(std::move(merged));
      continue;
    }
    merged.metrics.clear();
    for (const auto& [name, first] : list.front()->metrics) {
      const int better = better_direction(first.unit);
      std::vector<double> centers, best;
      std::int64_t steps = 0;
      bool single = true;
      for (const HistoryRecord* r : list) {
        const auto it = r->metrics.find(name);
        if (it == r->metrics.end()) break;
        centers.push_back(it->second.center);
        best.push_back(better > 0 ? it->second.max : it->second.min);
        steps += it->second.n;
        single = single && it->second.n <= 1;
      }
      if (centers.size() != list.size()) continue;
      MetricValue m;
      m.unit = first.unit;
      m.center = median(centers);
      m.min = *std::min_element(centers.begin(), centers.end());
      m.max = *std::max_element(centers.begin(), centers.end());
      double mean = 0, ss = 0;
      for (double v : centers) mean += v;
      mean /= centers.size();
      for (double v : centers) ss += (v - mean) * (v - mean);
      m.mean = mean;
      m.std = centers.size() > 1 ? std::sqrt(ss / (centers.size() - 1)) : 0;
      if (single) {
        m.n = 1;
      } else {
        // n counts steps, not rounds: the samples are then read as repetition
        // means (batch means), not as per-step samples.
        m.n = std::max<std::int64_t>(steps, static_cast<std::int64_t>(centers.size()) + 1);
        m.samples = centers;
        m.rounds = static_cast<std::int64_t>(centers.size());
        // Timings have slow outliers, never fast ones: a slow spell of the
        // machine that takes half of a round's steps moves its median, rarely
        // its fastest step (BenchmarkTools.jl's minimum estimator, Chen and
        // Revels 2016). Without a direction the best step means nothing.
        if (better != 0 &&
            std::all_of(best.begin(), best.end(), [](double v) { return v > 0; }))
          m.round_best = best;
      }
      merged.metrics.emplace(name, std::move(m));
    }
    out.records.push_back(std::move(merged));
  }
  for (const Side& round : rounds)
    out.runs.insert(out.runs.end(), round.runs.begin(), round.runs.end());
  if (!out.runs.empty()) out.runs.resize(1);  // one device check and description for all rounds
  out.description = std::to_string(rounds.size()) + " interleaved round(s): " + rounds.front().description +
                    (rounds.size() > 1 ? " ... " + rounds.back().description : "");
  return out;
}

}  // namespace runner::history
