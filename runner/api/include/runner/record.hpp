// What a task measures: metrics with units, grouped into records. The host adds
// the point's parameters, status and environment and appends it to results.jsonl.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace runner {

struct Stats {
  std::int64_t n = 0;
  double mean = 0, std = 0, median = 0, min = 0, max = 0;  // std: sample (n-1)
  // One mean per repetition (measure.repetitions > 1), for tests across runs.
  std::vector<double> repetition_means;
  static Stats of(const std::vector<double>& samples);
  // std / sqrt(n) / |mean|: how far the mean may be off; 0 when n < 2 or mean is 0.
  double rel_stderr() const;
};

struct Metric {
  std::string unit;  // "ms", "bytes", "TFLOP/s", "" for text
  std::variant<double, Stats, std::string> value;
};

struct Record {
  // Extra keys that tell records of one point apart (e.g. tensor=fc1_output).
  std::map<std::string, std::string> labels;
  std::vector<std::pair<std::string, Metric>> metrics;
  std::vector<std::string> artifacts;  // paths relative to the run directory

  Record& label(const std::string& key, const std::string& value);
  // Each add throws std::invalid_argument when the record already has a metric
  // of that name: two values under one name would silently lose one.
  Record& add(const std::string& name, Metric metric);
  Record& add(const std::string& name, double value, const std::string& unit);
  Record& add(const std::string& name, const Stats& stats, const std::string& unit);
  Record& add_text(const std::string& name, const std::string& text);
  const Metric* find(const std::string& name) const;
};

// Where a task sends its records; a task may emit several per point.
class Recorder {
 public:
  virtual ~Recorder();
  virtual void emit(Record record) = 0;
};

// Keeps every emitted record in order: for the host and for tasks' tests.
class RecordList : public Recorder {
 public:
  void emit(Record record) override { records.push_back(std::move(record)); }
  std::vector<Record> records;
};

}  // namespace runner
