// Compares of synthetic records in the history tests: one side of a compare made of
// records, and a row of its result by metric.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "history/compare.hpp"
#include "history/store.hpp"

namespace runner::history::testing {

inline Side side(const std::vector<nlohmann::json>& records, const std::string& device = "Test CPU", std::int64_t id = 1) {
  Side s;
  s.spec = "test";
  s.description = "run " + std::to_string(id);
  RunInfo r;
  r.id = id;
  r.experiment = "demo";
  r.device_name = device;
  s.runs.push_back(r);
  for (const auto& j : records) s.records.push_back(parse_record(j));
  return s;
}

inline const CompareRow& row(const Comparison& c, const std::string& metric, size_t point = 0) {
  size_t seen = 0;
  for (const auto& r : c.rows)
    if (r.metric == metric && seen++ == point) return r;
  throw std::runtime_error("no row " + metric);
}

}  // namespace runner::history::testing
