// The one results.jsonl codec (runner_records: no LibTorch, so the history and its
// tests use it without loading LibTorch).
#include "runner/stored_record.hpp"

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>

namespace runner {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Text from plugins (an error message quoting a file name) may not be UTF-8:
// replaced by U+FFFD, never a type_error that loses the record.
std::string safe_dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A text field: a string as is, anything else (a hand-edited file) as its JSON.
std::string text_of(const json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : safe_dump(value);
}

// JSON has no NaN or infinity: a metric's non-finite number is written as the text
// "NaN", "Infinity" or "-Infinity" (nlohmann would write null, which reads as a
// number never measured).
const char* non_finite_text(const json& value) {
  if (!value.is_string()) return nullptr;
  for (const char* text : {"NaN", "Infinity", "-Infinity"})
    if (value.get_ref<const std::string&>() == text) return text;
  return nullptr;
}

double number_of(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (const char* text = non_finite_text(value)) {
    if (text[0] == 'N') return kNaN;
    return text[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  return kNaN;
}

json number_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

json object_or_empty(const json& value) { return value.is_object() ? value : json::object(); }

// What a metric's JSON object holds beyond its Metric (rel_stderr, samples, ...).
json extra_keys(const json& metric, std::initializer_list<const char*> modelled) {
  json extra = json::object();
  for (const auto& [key, value] : metric.items()) {
    bool known = false;
    for (const char* name : modelled) known = known || key == name;
    if (!known) extra[key] = value;
  }
  return extra;
}

Metric decode_metric(const json& m, json* extra) {
  Metric metric;
  if (const auto unit = m.find("unit"); unit != m.end()) metric.unit = text_of(*unit);
  if (const auto text = m.find("text"); text != m.end()) {
    metric.value = text_of(*text);
    *extra = extra_keys(m, {"unit", "text"});
  } else if (const auto value = m.find("value"); value != m.end()) {
    metric.value = number_of(*value);
    *extra = extra_keys(m, {"unit", "value"});
  } else {
    Stats s;
    const auto n = m.find("n");
    s.n = n != m.end() && n->is_number_integer() ? n->get<std::int64_t>() : 0;
    const auto field = [&](const char* key) { return m.contains(key) ? number_of(m[key]) : kNaN; };
    s.mean = field("mean");
    s.std = field("std");
    s.median = field("median");
    s.min = field("min");
    s.max = field("max");
    const auto means = m.find("repetition_means");
    const bool typed_means = means != m.end() && means->is_array();
    if (typed_means)
      for (const auto& x : *means) s.repetition_means.push_back(number_of(x));
    metric.value = s;
    *extra = typed_means ? extra_keys(m, {"unit", "n", "mean", "std", "median", "min", "max", "repetition_means"})
                         : extra_keys(m, {"unit", "n", "mean", "std", "median", "min", "max"});
  }
  return metric;
}

json encode_metric(const Metric& m, const json* extra) {
  json out;
  if (const auto* d = std::get_if<double>(&m.value)) {
    out = {{"unit", m.unit}, {"value", number_json(*d)}};
  } else if (const auto* s = std::get_if<Stats>(&m.value)) {
    out = {{"unit", m.unit}, {"n", s->n}, {"mean", number_json(s->mean)}, {"std", number_json(s->std)},
           {"median", number_json(s->median)}, {"min", number_json(s->min)}, {"max", number_json(s->max)}};
    if (!s->repetition_means.empty()) {
      out["repetition_means"] = json::array();
      for (double x : s->repetition_means) out["repetition_means"].push_back(number_json(x));
    }
  } else {
    out["text"] = std::get<std::string>(m.value);
    if (!m.unit.empty()) out["unit"] = m.unit;
  }
  if (extra)
    for (const auto& [key, value] : extra->items()) out[key] = value;
  return out;
}

const char* type_name(const json& v) {
  if (v.is_string()) return "text";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "true/false";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "a list";
  return "null";
}

bool is(const json& v, char type) {
  switch (type) {
    case 's': return v.is_string();
    case 'i': return v.is_number_integer();
    case 'n': return v.is_number();
    case 'o': return v.is_object();
    case 'a': return v.is_array();
    default: return true;
  }
}

// The first field of `object` (among `fields`: key, type s/i/n/o/a) whose JSON
// type is wrong, as "<path>.<key> is <type>, expected <type>"; "" when none.
std::string wrong_field(const json& object, std::initializer_list<std::pair<const char*, char>> fields,
                        const std::string& path) {
  static const std::map<char, const char*> expected = {
      {'s', "text"}, {'i', "an integer"}, {'n', "a number"}, {'o', "an object"}, {'a', "a list"}};
  for (const auto& [key, type] : fields) {
    const auto it = object.find(key);
    // A number may be null (written so before NaN was written as text) or NaN/Infinity text.
    if (it != object.end() && !((it->is_null() || non_finite_text(*it)) && type == 'n') && !is(*it, type))
      return path + key + " is " + type_name(*it) + ", expected " + expected.at(type);
  }
  return "";
}

}  // namespace

const char* status_name(RecordStatus status) {
  switch (status) {
    case RecordStatus::ok: return "ok";
    case RecordStatus::error: return "error";
    case RecordStatus::oom: return "oom";
    case RecordStatus::skipped: return "skipped";
    case RecordStatus::interrupted: return "interrupted";
    case RecordStatus::timeout: return "timeout";
    case RecordStatus::invalid: return "invalid";
    case RecordStatus::other: break;
  }
  return "";
}

RecordStatus status_named(std::string_view text) {
  for (RecordStatus s : {RecordStatus::ok, RecordStatus::error, RecordStatus::oom, RecordStatus::skipped,
                         RecordStatus::interrupted, RecordStatus::timeout, RecordStatus::invalid})
    if (text == status_name(s)) return s;
  return RecordStatus::other;
}

std::string StoredRecord::status_text() const {
  return status == RecordStatus::other ? unknown_status : status_name(status);
}

double stat_named(const Stats& s, std::string_view name) {
  if (name == "n") return static_cast<double>(s.n);
  if (name == "mean") return s.mean;
  if (name == "std") return s.std;
  if (name == "median") return s.median;
  if (name == "min") return s.min;
  if (name == "max") return s.max;
  return kNaN;
}

const Metric* StoredRecord::metric(const std::string& name) const {
  for (const auto& [n, m] : metrics)
    if (n == name) return &m;
  return nullptr;
}

std::optional<double> StoredRecord::rel_stderr(const std::string& metric_name) const {
  const Metric* m = metric(metric_name);
  const auto* s = m ? std::get_if<Stats>(&m->value) : nullptr;
  if (!s) return std::nullopt;
  if (const auto extra = metric_extra.find(metric_name); extra != metric_extra.end())
    if (const auto stored = extra->second.find("rel_stderr"); stored != extra->second.end() && stored->is_number())
      return stored->get<double>();
  // Records written before rel_stderr was stored: derived from n, std and mean.
  if (s->n < 2 || s->mean == 0) return std::nullopt;
  return s->std / std::sqrt(static_cast<double>(s->n)) / std::fabs(s->mean);
}

const json* StoredRecord::label_or_param(const std::string& key) const {
  for (const json* section : {&labels, &params}) {
    if (!section->is_object()) continue;
    const auto found = section->find(key);
    if (found != section->end()) return &*found;
  }
  // "env.<field>": the environment the record was taken in (world_size, gpu, ...),
  // so a table can split rows by it; no label or param key starts with "env.".
  constexpr std::string_view kEnv = "env.";
  if (key.size() > kEnv.size() && key.compare(0, kEnv.size(), kEnv) == 0 && env.is_object()) {
    const auto found = env.find(key.substr(kEnv.size()));
    if (found != env.end()) return &*found;
  }
  return nullptr;
}

StoredRecord stored_record(const Record& record) {
  StoredRecord r;
  for (const auto& [key, value] : record.labels) r.labels[key] = value;
  for (const auto& [name, metric] : record.metrics) {
    // Records built without Record::add (metrics pushed directly) still must not
    // collide: the JSON object would keep only the last value.
    if (r.metric(name)) throw std::invalid_argument("metric '" + name + "' appears twice in one record");
    r.metrics.emplace_back(name, metric);
    if (const auto* s = std::get_if<Stats>(&metric.value); s && s->n >= 2)  // one sample says nothing about noise
      r.metric_extra[name] = {{"rel_stderr", number_json(s->rel_stderr())}};
  }
  r.artifacts = record.artifacts;
  return r;
}

StoredRecord decode_record(const json& j) {
  if (!j.is_object()) throw std::runtime_error("expected one JSON object per line");
  StoredRecord r;
  for (const auto& [key, value] : j.items()) {
    if (key == "experiment") r.experiment = text_of(value);
    else if (key == "part") r.part = text_of(value);
    else if (key == "task") r.task = text_of(value);
    else if (key == "time") r.time = text_of(value);
    else if (key == "point") { if (value.is_number_integer()) r.point = value.get<std::int64_t>(); }
    else if (key == "status") {
      const std::string text = value.is_null() ? "ok" : text_of(value);
      r.status = status_named(text);
      if (r.status == RecordStatus::other) r.unknown_status = text;
    }
    else if (key == "error" || key == "reason") {
      if (key == "error" || !j.contains("error")) r.message = text_of(value);
      else r.observed[key] = value;  // both present (not the runner's): keep the reason
    }
    else if (key == "params") r.params = object_or_empty(value);
    else if (key == "labels") r.labels = object_or_empty(value);
    else if (key == "env") r.env = object_or_empty(value);
    else if (key == "artifacts") {
      if (value.is_array())
        for (const auto& a : value) r.artifacts.push_back(text_of(a));
    }
    else if (key == "point_record" && value.is_array() && value.size() == 2 && value[0].is_number_integer() &&
             value[1].is_number_integer())
      r.point_record.emplace(value[0].get<std::int64_t>(), value[1].get<std::int64_t>());
    else if (key == "metrics") {
      if (!value.is_object()) continue;
      for (const auto& [name, m] : value.items()) {
        if (!m.is_object()) continue;
        json extra;
        r.metrics.emplace_back(name, decode_metric(m, &extra));
        if (!extra.empty()) r.metric_extra[name] = std::move(extra);
      }
    }
    else r.observed[key] = value;
  }
  return r;
}

json encode_record(const StoredRecord& r) {
  json j;
  j["experiment"] = r.experiment;
  j["part"] = r.part;
  if (r.point) j["point"] = *r.point;
  j["task"] = r.task;
  j["status"] = r.status_text();
  if (!r.message.empty()) j[r.status == RecordStatus::skipped ? "reason" : "error"] = r.message;
  j["params"] = r.params;
  j["labels"] = r.labels;
  j["metrics"] = json::object();
  for (const auto& [name, m] : r.metrics) {
    const auto extra = r.metric_extra.find(name);
    j["metrics"][name] = encode_metric(m, extra == r.metric_extra.end() ? nullptr : &extra->second);
  }
  j["artifacts"] = r.artifacts;
  for (const auto& [key, value] : r.observed.items()) j[key] = value;
  if (r.point_record) j["point_record"] = {r.point_record->first, r.point_record->second};
  j["env"] = r.env;
  j["time"] = r.time;
  return j;
}

std::string record_line(const StoredRecord& record) { return safe_dump(encode_record(record)); }

std::string check_record_types(const json& r) {
  std::string why = wrong_field(r, {{"experiment", 's'}, {"part", 's'}, {"task", 's'}, {"status", 's'}, {"error", 's'},
                                    {"reason", 's'}, {"time", 's'}, {"timer", 's'}, {"point", 'i'}, {"params", 'o'},
                                    {"labels", 'o'}, {"metrics", 'o'}, {"env", 'o'}, {"artifacts", 'a'},
                                    {"point_record", 'a'}},
                                "");
  if (!why.empty()) return why;
  if (const auto m = r.find("metrics"); m != r.end() && m->is_object())
    for (const auto& [name, metric] : m->items()) {
      if (!metric.is_object()) return "metrics." + name + " is " + type_name(metric) + ", expected an object";
      why = wrong_field(metric, {{"unit", 's'}, {"value", 'n'}, {"mean", 'n'}, {"std", 'n'}, {"median", 'n'},
                                 {"min", 'n'}, {"max", 'n'}, {"rel_stderr", 'n'}, {"n", 'i'}, {"samples", 'a'},
                                 {"repetition_means", 'a'}, {"text", 's'}},
                        "metrics." + name + ".");
      if (!why.empty()) return why;
    }
  if (const auto m = r.find("measurement"); m != r.end()) {
    for (const auto& entry : m->is_array() ? *m : json::array({*m})) {
      if (!entry.is_object()) return std::string("measurement is ") + type_name(entry) + ", expected an object";
      why = wrong_field(entry, {{"target_rel_stderr", 'n'}}, "measurement.");
      if (!why.empty()) return why;
    }
  }
  return "";
}

json parse_record_line(const std::string& line) {
  // nlohmann parses iteratively, but copies, compares and dumps recurse: a
  // 100,000-deep array would overflow the stack later. No record nests deeper
  // than a few levels.
  try {
    return json::parse(line, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxRecordDepth)
        throw std::runtime_error("nested more than " + std::to_string(kMaxRecordDepth) +
                                 " levels deep (not a record the runner writes)");
      return true;
    });
  } catch (const json::out_of_range& e) {  // a number past double's range (1e6875): not a parse_error
    throw std::runtime_error(std::string("unreadable JSON: ") + e.what() + " (not a record the runner writes)");
  }
}

namespace {

struct Scan {
  std::vector<StoredRecord> records;
  std::vector<std::size_t> group;   // per record: which whole point (in file order) it came with
  std::uintmax_t whole_length = 0;  // bytes up to the end of the last whole point
};

// A point written again (--resume runs failed and interrupted points anew) replaces
// what was read of it before: only its last write, marked with point_record, stays.
// A record's point is its part and index within its source run.
void keep_last_writes(Scan& scan) {
  const auto key = [](const StoredRecord& r) {
    return r.observed.value("source_run", json()).dump() + "\n" + r.part + "\n" + std::to_string(*r.point);
  };
  std::map<std::string, std::size_t> last_write;
  for (std::size_t i = 0; i < scan.records.size(); ++i)
    if (scan.records[i].point_record && scan.records[i].point) last_write[key(scan.records[i])] = scan.group[i];
  if (last_write.empty()) return;
  std::vector<StoredRecord> kept;
  for (std::size_t i = 0; i < scan.records.size(); ++i) {
    StoredRecord& r = scan.records[i];
    const auto later = r.point ? last_write.find(key(r)) : last_write.end();
    if (later == last_write.end() || scan.group[i] >= later->second) kept.push_back(std::move(r));
  }
  scan.records = std::move(kept);
}

// Reads every line; keeps the records of whole points. `torn_if_unterminated`: a
// last line without its newline counts as cut off (the writer always ends a point
// with one), for the length --resume keeps.
Scan scan_records(const std::filesystem::path& results_jsonl, RecordTypes types, std::vector<std::string>* warnings,
                  bool torn_if_unterminated) {
  std::error_code ec;
  const auto status = std::filesystem::status(results_jsonl, ec);
  if (!ec && !std::filesystem::is_regular_file(status))  // a FIFO would hang every reader, /dev/zero never end
    throw std::runtime_error(results_jsonl.string() +
                             ": not a regular file; records are read from a results.jsonl file");
  std::ifstream in(results_jsonl, std::ios::binary);
  if (!in) throw std::runtime_error(results_jsonl.string() + ": cannot open");
  std::vector<std::string> lines;
  std::vector<std::uintmax_t> ends;  // byte offset just past each line (and its newline)
  std::uintmax_t offset = 0;
  bool terminated = true;
  for (std::string line; std::getline(in, line);) {
    terminated = !in.eof();
    offset += line.size() + (terminated ? 1 : 0);
    ends.push_back(offset);
    lines.push_back(std::move(line));
  }
  const auto warn = [&](const std::string& warning) {
    if (warnings) warnings->push_back(warning);
    else std::cerr << "warning: " << warning << "\n";
  };
  const auto blank = [](const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; };
  std::size_t last = lines.size();
  while (last > 0 && blank(lines[last - 1])) --last;
  Scan scan;
  std::size_t groups = 0;
  // The records of the point being read (with point_record), not yet all there.
  std::vector<StoredRecord> pending;
  std::size_t pending_line = 0;
  const auto drop_pending = [&] {
    if (pending.empty()) return;
    const StoredRecord& first = pending.front();
    warn(results_jsonl.string() + ":" + std::to_string(pending_line) + ": skipped point " + first.part + "[" +
         (first.point ? std::to_string(*first.point) : std::string("?")) + "]: " + std::to_string(pending.size()) +
         " of its " + std::to_string(first.point_record->second) +
         " records (the run stopped while writing it; --resume runs it again)");
    pending.clear();
  };
  for (std::size_t i = 0; i < last; ++i) {
    if (blank(lines[i])) continue;
    const std::string where = results_jsonl.string() + ":" + std::to_string(i + 1) + ": ";
    json line;
    try {
      line = parse_record_line(lines[i]);
    } catch (const json::parse_error& e) {
      if (i + 1 == last) {  // points are appended whole; only a kill cuts the last one
        warn(where + "skipped a truncated last record (the run was killed while writing it)");
        break;
      }
      throw std::runtime_error(where + "malformed JSON: " + e.what());
    } catch (const std::runtime_error& e) {  // nested too deep, or a number past double's range
      throw std::runtime_error(where + e.what());
    }
    if (!line.is_object()) throw std::runtime_error(where + "expected one JSON object per line");
    if (types == RecordTypes::checked)
      if (const std::string why = check_record_types(line); !why.empty())
        throw std::runtime_error(where + why + " (not a record the runner writes)");
    StoredRecord record = decode_record(line);
    const bool cut = torn_if_unterminated && !terminated && i + 1 == lines.size();
    if (!record.point_record) {  // written before point_record: whole by assumption
      drop_pending();
      if (cut) break;
      scan.records.push_back(std::move(record));
      scan.group.push_back(groups++);
      scan.whole_length = ends[i];
      continue;
    }
    const auto [index, count] = *record.point_record;
    const bool continues = !pending.empty() && index == static_cast<std::int64_t>(pending.size()) + 1 &&
                           count == pending.front().point_record->second && record.part == pending.front().part &&
                           record.point == pending.front().point;
    if (!continues) drop_pending();
    if (!continues && index != 1) {  // the tail of a point whose head is gone
      pending_line = i + 1;
      pending.push_back(std::move(record));
      drop_pending();
      continue;
    }
    if (pending.empty()) pending_line = i + 1;
    pending.push_back(std::move(record));
    if (static_cast<std::int64_t>(pending.size()) == count && !cut) {
      for (auto& r : pending) {
        scan.records.push_back(std::move(r));
        scan.group.push_back(groups);
      }
      ++groups;
      pending.clear();
      scan.whole_length = ends[i];
    }
  }
  drop_pending();
  keep_last_writes(scan);
  return scan;
}

}  // namespace

std::vector<StoredRecord> read_records(const std::filesystem::path& results_jsonl, RecordTypes types,
                                       std::vector<std::string>* warnings) {
  return scan_records(results_jsonl, types, warnings, false).records;
}

std::uintmax_t whole_points_length(const std::filesystem::path& results_jsonl) {
  std::vector<std::string> warnings;
  return scan_records(results_jsonl, RecordTypes::checked, &warnings, true).whole_length;
}

}  // namespace runner
