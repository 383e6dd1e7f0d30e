// The read side of Record: one results.jsonl line as the host wrote it (experiment,
// point, status, parameters, labels, metrics with units, environment). Every reader
// (reports, the history, compare, --resume, rank gathering, plugins) goes through the
// one codec here, implemented in runner_records (nlohmann_json only, no LibTorch), so
// the history library and plugins read records the same way the host writes them.
// Keys the codec does not model (what the host observed: "measurement", "gpu",
// "ranks", "profilers", "source_run"; a metric's "rel_stderr" and "samples") are
// kept as written: decoding a line and encoding it again gives the same line.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/record.hpp"

namespace runner {

// How a point ended. `timeout`: it ran past measure.timeout_s. `invalid`: it
// finished, but a metric is NaN or infinite, or a metric its task declares is
// missing. `other`: a status this runner does not write (a foreign or hand-edited
// file); its text stays in StoredRecord::unknown_status.
enum class RecordStatus { ok, error, oom, skipped, interrupted, timeout, invalid, other };

// "ok", "error", "oom", "skipped", "interrupted", "timeout", "invalid"; "" for other.
const char* status_name(RecordStatus status);
// The status named `text`; other when no status is named so.
RecordStatus status_named(std::string_view text);

struct StoredRecord {
  std::string experiment, part, task;
  std::optional<std::int64_t> point;  // the point's index in its part's sweep (absent in foreign files)
  RecordStatus status = RecordStatus::ok;
  std::string unknown_status;  // the text of an `other` status
  // The error (error, oom, interrupted: key "error") or the reason (skipped: key "reason").
  std::string message;
  nlohmann::json params = nlohmann::json::object();  // flat dotted keys, native JSON types
  nlohmann::json labels = nlohmann::json::object();  // what tells records of one point apart
  // In the file's order (nlohmann keeps object keys sorted). A null number (NaN on
  // write) reads as NaN; a stats metric's missing field reads as NaN (n: 0).
  // A number written as the text "NaN", "Infinity" or "-Infinity" (JSON has none)
  // reads as that number.
  std::vector<std::pair<std::string, Metric>> metrics;
  // Per metric name, the keys of its JSON object beyond Metric's (rel_stderr, samples).
  std::map<std::string, nlohmann::json> metric_extra;
  std::vector<std::string> artifacts;
  nlohmann::json env = nlohmann::json::object();
  std::string time;
  // Every other top-level key, as written: measurement, gpu, ranks, profilers, source_run.
  nlohmann::json observed = nlohmann::json::object();
  // (i, n): this is record i (from 1) of the n records its point was written with,
  // all in one append ("point_record": [i, n]). A point whose n records are not all
  // there was cut off while being written: readers skip it, --resume runs it again.
  // Absent in files written before the field existed (their points count as whole).
  std::optional<std::pair<std::int64_t, std::int64_t>> point_record;

  // The status as text: status_name, or the unknown status's own text.
  std::string status_text() const;
  bool failed() const { return status != RecordStatus::ok; }
  const Metric* metric(const std::string& name) const;
  // The relative standard error of a stats metric's mean: as stored, else
  // std / sqrt(n) / |mean| for n >= 2 and mean != 0; nullopt otherwise.
  std::optional<double> rel_stderr(const std::string& metric_name) const;
  // A key's value from the labels, else the params; "env.<field>" reads the
  // environment. nullptr when none has it.
  const nlohmann::json* label_or_param(const std::string& key) const;
};

// One field of stats by name (n, mean, std, median, min, max); NaN for another name
// and for a field the record holds as null.
double stat_named(const Stats& stats, std::string_view name);

// The record a task emitted for one point, as the host stores it (time and
// environment filled in by the caller). Stats of n >= 2 store their rel_stderr.
// Throws std::invalid_argument when two metrics share a name.
StoredRecord stored_record(const Record& record);

// One JSON object (a results.jsonl line) as a record. Lenient: a field of the wrong
// JSON type reads as its compact JSON text (text fields) or its default, never a
// type error; check_record_types says what is wrong first where that matters.
StoredRecord decode_record(const nlohmann::json& line);
// The record as the host writes it: decode_record(encode_record(r)) reads r back
// field for field, and encode_record(decode_record(line)) of a line the runner
// wrote is that line.
nlohmann::json encode_record(const StoredRecord& record);
// One line of results.jsonl: compact, text that is not UTF-8 replaced by U+FFFD.
std::string record_line(const StoredRecord& record);

// "" when every field the runner writes has its JSON type, else the first that
// does not, as "<path> is <type>, expected <type>" (e.g. "metrics.t.n is text,
// expected an integer").
std::string check_record_types(const nlohmann::json& line);

// Records nest a few levels; deeper input is refused (copies and dumps of it
// would recurse deep enough to overflow the stack).
constexpr int kMaxRecordDepth = 64;
// One results.jsonl line parsed: throws nlohmann's parse_error, or runtime_error
// "nested more than 64 levels deep (not a record the runner writes)" or
// "unreadable JSON: <nlohmann's out_of_range> (not a record the runner writes)"
// (a number past double's range).
nlohmann::json parse_record_line(const std::string& line);

// How read_records treats a line whose fields have the wrong JSON types:
// refused (reports: a table would show nonsense) or read leniently (the history).
enum class RecordTypes { checked, lenient };

// Every record of a results.jsonl, in order, of whole points only: the records of a
// point missing some of its "point_record" siblings (a write cut off by a kill or a
// full disk) are skipped with a warning. Blank lines are skipped. Throws
// runtime_error "<file>:<line>: <what>" on a malformed line, a line that is not an
// object or nests too deep, and (checked) a field of the wrong type; a malformed
// last line (a record cut off by a kill) is skipped with a warning in `warnings`
// (or on stderr when null). "<file>: cannot open" when it cannot be read.
std::vector<StoredRecord> read_records(const std::filesystem::path& results_jsonl, RecordTypes types,
                                       std::vector<std::string>* warnings = nullptr);

// The length in bytes of the file's prefix that ends with its last whole point (each
// line ending in a newline): what --resume keeps before it appends. Throws as
// read_records (checked) does on a malformed line before the end.
std::uintmax_t whole_points_length(const std::filesystem::path& results_jsonl);

}  // namespace runner
