#include "runner/record.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace runner {

Stats Stats::of(const std::vector<double>& samples) {
  Stats s;
  s.n = static_cast<std::int64_t>(samples.size());
  if (samples.empty()) return s;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  const size_t mid = sorted.size() / 2;
  s.median = sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.n);
  if (s.n > 1) {
    double sq = 0;
    for (double x : sorted) sq += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(sq / static_cast<double>(s.n - 1));
  }
  return s;
}

double Stats::rel_stderr() const {
  if (n < 2 || mean == 0) return 0;
  return std / std::sqrt(static_cast<double>(n)) / std::fabs(mean);
}

Record& Record::label(const std::string& key, const std::string& value) {
  labels[key] = value;
  return *this;
}

Record& Record::add(const std::string& name, Metric metric) {
  if (find(name) != nullptr)
    throw std::invalid_argument("metric '" + name + "' added twice to one record; give each metric its own name");
  metrics.emplace_back(name, std::move(metric));
  return *this;
}

Record& Record::add(const std::string& name, double value, const std::string& unit) {
  return add(name, Metric{unit, value});
}

Record& Record::add(const std::string& name, const Stats& stats, const std::string& unit) {
  return add(name, Metric{unit, stats});
}

Record& Record::add_text(const std::string& name, const std::string& text) { return add(name, Metric{"", text}); }

const Metric* Record::find(const std::string& name) const {
  for (const auto& [n, m] : metrics)
    if (n == name) return &m;
  return nullptr;
}

Recorder::~Recorder() = default;

}  // namespace runner
