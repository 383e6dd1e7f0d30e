// Measures compare's detector itself: pairs of runs of a 20-point CPU sweep,
// A/A (nothing changed) and A/B with a known slowdown injected into B (the
// work of every step scaled by 1 + effect), each judged by compare() at its
// default settings. Prints one JSON line per (records, effect): how many
// slowed points were flagged slower, and how many compares raised a
// regression (for A/A: false alarms).
//   runner_detection_tool [--compares N] [--aa N] [--records summary,repetitions,samples] [--lookback] [--check]
//                         [--aa-bar RATE] [--interleaved ROUNDS] [--effects 0,0.1,0.5,3] [--dump FILE]
// --records says what the records hold, as the runner writes them: "summary"
// (the default measure: 10 steps, mean/std/median/min/max), "repetitions"
// (measure.repetitions: 5 x 10 steps, one mean per repetition), "samples"
// (30 per-step samples). --lookback keeps a history of each point's baseline
// medians and judges with it, as runner compare does with a history (the
// lookback of compare.hpp). --interleaved R measures each pair as `runner ab`
// does: R runs a side in the order A B B A A B ..., each side's rounds merged
// by merge_rounds (interleave.hpp); without it A runs once, then B once
// (back to back, as a scheduled run against last-good). --check exits 1 when the default ("summary") misses
// the bar: 4x in every point (that claims to see it: below), 50 % in every compare, 10 % in 95 % of compares,
// false alarms in at most 1 % of A/A compares (--aa-bar sets that rate). A
// slowdown is held to the bar when it is at least twice what the A/A points'
// tests detect at the machine's spread (their median "detectable"): a noisy
// machine cannot show 10 % in 3 rounds a side, and the check says so instead
// of failing; the A/A bar holds on any machine. Likewise per point: 4x must be
// found in every point whose own test detects 150 % or less at its spread. --dump FILE writes every
// round's points (median, min, max) for a look at the machine's noise.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "history/compare.hpp"
#include "history/interleave.hpp"

namespace {

using runner::history::compare;
using runner::history::interleaved_order;
using runner::history::merge_rounds;
using runner::history::CompareOptions;
using runner::history::parse_record;
using runner::history::Side;

// A dependent chain of floating-point operations: the compiler cannot
// vectorize or shorten it, so its time scales with `iterations`.
double chain(std::int64_t iterations) {
  volatile double seed = 1.0;
  double x = seed;
  for (std::int64_t i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

double step_ms(std::int64_t iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile double sink = chain(iterations);
  (void)sink;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Layout {
  std::string name;
  int repetitions, steps;
};

nlohmann::json stats_json(const std::vector<double>& all) {
  std::vector<double> s = all;
  std::sort(s.begin(), s.end());
  double mean = 0;
  for (double v : all) mean += v;
  mean /= all.size();
  double var = 0;
  for (double v : all) var += (v - mean) * (v - mean);
  const size_t n = s.size();
  return {{"unit", "ms"},
          {"n", n},
          {"mean", mean},
          {"std", std::sqrt(var / std::max<size_t>(1, n - 1))},
          {"median", n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2},
          {"min", s.front()},
          {"max", s.back()}};
}

// One run of the sweep: 20 points of growing work, each warmed up, then
// measured as the layout says; `effect` slows every step of every point.
Side run(const Layout& layout, double effect, std::int64_t base, int id) {
  Side side;
  side.spec = side.description = "run " + std::to_string(id);
  runner::history::RunInfo info;
  info.id = id;
  info.experiment = "regression_detection";
  info.device_name = "detector CPU";
  side.runs.push_back(info);
  for (int point = 0; point < 20; ++point) {
    const std::int64_t work = base * (10 + point) / 10;
    const auto iterations = static_cast<std::int64_t>(std::llround(static_cast<double>(work) * (1 + effect)));
    std::vector<double> all, means;
    for (int r = 0; r < layout.repetitions; ++r) {
      for (int w = 0; w < 2; ++w) step_ms(iterations);
      double sum = 0;
      for (int i = 0; i < layout.steps; ++i) {
        all.push_back(step_ms(iterations));
        sum += all.back();
      }
      means.push_back(sum / layout.steps);
    }
    nlohmann::json metric = stats_json(all);
    if (layout.name == "repetitions") metric["repetition_means"] = means;
    if (layout.name == "samples") metric["samples"] = all;
    const nlohmann::json record = {
        {"experiment", "regression_detection"}, {"part", "cpu_chain"}, {"point", point}, {"task", "chain"},
        {"status", "ok"}, {"params", {{"work", work}, {"device", "cpu"}}}, {"labels", nlohmann::json::object()},
        {"env", {{"device", "cpu"}, {"cpu", "detector CPU"}}}, {"time", "2026-11-28T00:00:00Z"},
        {"artifacts", nlohmann::json::array()}, {"metrics", {{"step_ms", metric}}}};
    side.records.push_back(parse_record(record));
  }
  return side;
}

// P(X >= k) for X ~ Binomial(n, p).
double binomial_tail_at_least(int k, int n, double p) {
  double tail = 0;
  for (int i = k; i <= n; ++i) tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                                                i * std::log(p) + (n - i) * std::log1p(-p));
  return tail;
}

std::string effect_name(double e) {
  if (e == 0) return "0 % (A/A)";
  if (e >= 1) return std::to_string(static_cast<int>(std::lround(1 + e))) + "x";
  std::ostringstream s;
  s << std::lround(e * 100) << " %";
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  int compares = 20, aa = 100;
  std::vector<std::string> layouts = {"summary"};
  bool check = false, lookback = false;
  int rounds = 0;  // 0: back to back
  std::vector<double> effects = {0.0, 0.02, 0.05, 0.10, 0.50, 3.0};
  double aa_bar = 0.01;  // the false-alarm rate --check holds A/A compares to
  std::ofstream dump;    // --dump FILE: every run's points, one JSON line each
  double aa_detectable = -1;  // median detectable change of the A/A points; -1 before A/A
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--compares" && i + 1 < argc) compares = std::atoi(argv[++i]);
    else if (a == "--aa" && i + 1 < argc) aa = std::atoi(argv[++i]);
    else if (a == "--records" && i + 1 < argc) {
      layouts.clear();
      std::stringstream in(argv[++i]);
      for (std::string l; std::getline(in, l, ',');) layouts.push_back(l);
    } else if (a == "--check") check = true;
    else if (a == "--lookback") lookback = true;
    else if (a == "--aa-bar" && i + 1 < argc) aa_bar = std::atof(argv[++i]);
    else if (a == "--interleaved" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--dump" && i + 1 < argc) dump.open(argv[++i]);
    else if (a == "--effects" && i + 1 < argc) {
      effects.clear();
      std::stringstream in(argv[++i]);
      for (std::string e; std::getline(in, e, ',');) effects.push_back(std::atof(e.c_str()));
    }
    else {
      std::cerr << "usage: runner_detection_tool [--compares N] [--aa N] [--records summary,repetitions,samples] "
                   "[--lookback] [--check] [--aa-bar RATE] [--interleaved ROUNDS] [--effects 0,0.1,...] [--dump FILE]\n";
      return 2;
    }
  }
  // About 0.2 ms for the smallest point: calibrated here, so the sweep takes
  // as long on any CPU.
  // The fastest of 5 calls: one preempted call must not stop the doubling
  // early (steps of 30 us drift by several % with the clock frequency alone).
  auto fastest = [](std::int64_t iterations) {
    double best = step_ms(iterations);
    for (int i = 0; i < 4; ++i) best = std::min(best, step_ms(iterations));
    return best;
  };
  std::int64_t base = 1000;
  while (fastest(base) < 0.2 && base < (std::int64_t{1} << 40)) base *= 2;
  bool ok = true;
  for (const std::string& name : layouts) {
    const Layout layout = name == "repetitions" ? Layout{name, 5, 10} : name == "samples" ? Layout{name, 1, 30}
                                                                                       : Layout{"summary", 1, 10};
    // --lookback: as in a history, the medians of the 10 latest baseline runs
    // of each point (seeded with 5) judge whether B is within the point's
    // usual run-to-run spread.
    std::map<std::string, std::deque<double>> history;
    auto remember = [&](const Side& side) {
      for (const auto& r : side.records) {
        auto& h = history[runner::history::point_identity(r) + "\nstep_ms"];
        h.push_back(r.metrics.at("step_ms").center);
        if (h.size() > 10) h.pop_front();
      }
    };
    int id = 0;
    if (lookback)
      for (int i = 0; i < 5; ++i) remember(run(layout, 0, base, ++id));
    const std::string label = layout.name + (lookback ? " + lookback" : "") +
                              (rounds ? ", interleaved " + std::to_string(rounds) + " rounds" : "");
    for (const double effect : effects) {
      const int n = effect == 0 ? aa : compares;
      int points = 0, detected = 0, flagged = 0, held_points = 0, held_detected = 0;
      std::vector<double> detectable;
      for (int c = 0; c < n; ++c) {
        Side a, b;
        if (rounds) {
          std::vector<Side> as, bs;
          for (const char side : interleaved_order(rounds))
            (side == 'A' ? as : bs).push_back(run(layout, side == 'A' ? 0 : effect, base, ++id));
          if (dump.is_open())
            for (const auto* sides : {&as, &bs})
              for (size_t r = 0; r < sides->size(); ++r)
                for (const auto& rec : (*sides)[r].records) {
                  const auto& m = rec.metrics.at("step_ms");
                  dump << nlohmann::json{{"effect", effect}, {"compare", c}, {"side", sides == &as ? "A" : "B"},
                                         {"round", r}, {"point", rec.point}, {"median", m.center},
                                         {"min", m.min}, {"max", m.max}, {"mean", m.mean}, {"std", m.std}}
                              .dump()
                       << "\n";
                }
          a = merge_rounds(as, "A");
          b = merge_rounds(bs, "B");
        } else {
          a = run(layout, 0, base, ++id);
          b = run(layout, effect, base, ++id);
        }
        CompareOptions options;
        if (lookback)
          for (const auto& [key, h] : history) options.lookback[key].assign(h.begin(), h.end());
        if (lookback) remember(a);
        const auto result = compare(std::move(a), std::move(b), options);
        flagged += result.regression();
        for (const auto& row : result.rows)
          if (row.metric == "step_ms") {
            ++points;
            detected += row.verdict == "slower";
            if (row.detectable > 0) detectable.push_back(row.detectable);
            // The point's own test claims to see this slowdown (twice what it
            // detects at the point's spread): a miss there is the detector's.
            if (row.detectable < 0 || effect >= 2 * row.detectable) {
              ++held_points;
              held_detected += row.verdict == "slower";
            }
            if ((effect == 0) == row.regression && std::getenv("RUNNER_DETECTION_SHOW"))
              std::cerr << (effect == 0 ? "A/A alarm: " : "missed: ") << row.point << " " << row.a << " -> " << row.b << " ms, p " << row.p_value
                        << (row.separated ? ", separated" : "") << " " << row.test << " " << row.note << "\n";
          }
      }
      if (effect == 0 && !detectable.empty()) {
        std::nth_element(detectable.begin(), detectable.begin() + detectable.size() / 2, detectable.end());
        aa_detectable = detectable[detectable.size() / 2];
      }
      const double point_rate = points ? static_cast<double>(detected) / points : 0;
      const double compare_rate = n ? static_cast<double>(flagged) / n : 0;
      std::cout << nlohmann::json{{"records", label},             {"effect", effect},
                                  {"effect_name", effect_name(effect)}, {"compares", n},
                                  {"points", points},             {"slower_points", detected},
                                  {"flagged_compares", flagged},  {"point_rate", point_rate},
                                  {"compare_rate", compare_rate}, {"steps", layout.steps},
                                  {"repetitions", layout.repetitions}, {"rounds", rounds},
                                  {"detectable", effect == 0 ? aa_detectable : -1},
                                  {"held_points", held_points}, {"held_slower_points", held_detected}}
                       .dump()
                << std::endl;
      // What the machine lets the design see: the median over the A/A points of
      // the change their test detects at their spread. A slowdown smaller than
      // twice that is not held to the bar (a noisy machine cannot show 10 %
      // with 3 rounds a side, and no detector that keeps false alarms at 1 %
      // can); a machine on which not even 4x is held measures nothing.
      const bool held = effect == 0 || aa_detectable < 0 || effect >= 2 * aa_detectable;
      if (check && layout.name == "summary" && !held) {
        std::cerr << "not held to the bar: " << effect_name(effect) << " (this machine's A/A points detect about "
                  << std::lround(aa_detectable * 100) << " %; the bar holds twice that)\n";
        if (effect >= 3) ok = false;
      }
      if (check && layout.name == "summary" && held) {
        // 4x: every compare, and every point whose own test claims to see 4x
        // (a point whose rounds wandered by 2x or more says "noisy" honestly;
        // they must be at most half the points); 50 %: every compare (a point of a
        // pair whose A ran while the machine was busy can read less than 5 %
        // slower). 10 % and false alarms: rates from a few compares, so the
        // check fails only when the count is unlikely (below 1 %) under a rate
        // at the bar: >= 95 % of compares detected, <= 1 % of A/A flagged.
        const bool pass = effect == 0 ? binomial_tail_at_least(flagged, n, aa_bar) >= 0.01
                          : effect >= 3 ? held_detected == held_points && 2 * held_points >= points && flagged == n
                          : effect >= 0.5 ? flagged == n
                          : effect >= 0.1 ? binomial_tail_at_least(n - flagged, n, 0.05) >= 0.01 : true;
        if (!pass) {
          std::cerr << "detector misses the bar at " << effect_name(effect) << ": " << detected << " of " << points
                    << " points slower (" << held_detected << " of the " << held_points
                    << " whose spread lets them see it), " << flagged << " of " << n << " compares flagged\n";
          ok = false;
        }
      }
    }
  }
  return ok ? 0 : 1;
}
