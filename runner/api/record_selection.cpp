#include "runner/record_selection.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace runner {
namespace {

using nlohmann::json;

bool as_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0';
}

std::string json_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

bool same_value(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  if (as_number(a, x) && as_number(b, y)) return x == y;
  return a == b;
}

// The record's value for `key`: a label first, else a param; false when absent.
bool record_value(const StoredRecord& record, const std::string& key, std::string& out) {
  for (const json* section : {&record.labels, &record.params}) {
    const auto v = section->find(key);
    if (v != section->end() && !v->is_null()) {
      out = json_text(*v);
      return true;
    }
  }
  return false;
}

std::string describe(const RecordSelection& sel) {
  std::string out = sel.part.empty() ? "" : "part=" + sel.part;
  for (const auto& [k, v] : sel.where) out += (out.empty() ? "" : ", ") + k + "=" + (v.empty() ? "(absent)" : v);
  return out.empty() ? "(any)" : out;
}

std::vector<StoredRecord> read_file(const std::filesystem::path& file) {
  if (!std::ifstream(file))
    throw std::invalid_argument("measured_file '" + file.string() +
                                "': cannot be read; run that experiment with --reports reports first, or set "
                                "measured_file: \"\" to report the analytic value alone");
  try {
    std::vector<std::string> torn_last_line;  // a run still writing: its whole records are what it measured
    return runner::read_records(file, runner::RecordTypes::lenient, &torn_last_line);
  } catch (const std::runtime_error& e) {  // names the file and line
    throw std::invalid_argument("measured_file " + std::string(e.what()) +
                                "; point measured_file at a run's results.jsonl");
  }
}

bool matches(const StoredRecord& record, const RecordSelection& sel) {
  if (!sel.part.empty() && record.part != sel.part) return false;
  for (const auto& [key, want] : sel.where) {
    std::string have;
    const bool present = record_value(record, key, have);
    if (want.empty() ? present : !(present && same_value(have, want))) return false;
  }
  return true;
}

MeasuredRecord reduce(const StoredRecord& record, const std::string& stat) {
  MeasuredRecord out;
  out.status = record.status;
  out.status_text = record.status_text();
  for (const auto& [name, m] : record.metrics) {
    double v = std::nan("");
    if (const auto* value = std::get_if<double>(&m.value)) v = *value;
    else if (const auto* stats = std::get_if<runner::Stats>(&m.value)) v = runner::stat_named(*stats, stat);
    if (std::isnan(v)) continue;
    out.numbers[name] = v;
    out.units[name] = m.unit;
  }
  return out;
}

// Why nothing matched: the first condition no record meets, with the values there are.
std::string no_match_hint(const std::vector<StoredRecord>& records, const RecordSelection& sel) {
  RecordSelection partial;
  partial.part = sel.part;
  for (const auto& condition : sel.where) {
    std::set<std::string> seen;
    bool any = false;
    for (const StoredRecord& r : records) {
      if (!matches(r, partial)) continue;
      std::string v;
      seen.insert(record_value(r, condition.first, v) ? v : "(absent)");
      RecordSelection one = partial;
      one.where.push_back(condition);
      any = any || matches(r, one);
    }
    if (!any) {
      std::string values;
      for (const auto& v : seen) values += (values.empty() ? "" : ", ") + v;
      return "; " + condition.first + " has " + (values.empty() ? "no values" : values) + " there";
    }
    partial.where.push_back(condition);
  }
  if (!sel.part.empty()) {
    bool part_seen = false;
    for (const StoredRecord& r : records) part_seen = part_seen || r.part == sel.part;
    if (!part_seen) return "; the file has no part '" + sel.part + "' (measured_part)";
  }
  return "";
}

std::vector<StoredRecord> matching(const RecordSelection& sel, std::vector<StoredRecord>& all) {
  all = read_file(sel.file);
  std::vector<StoredRecord> hits;
  for (const StoredRecord& r : all)
    if (matches(r, sel)) hits.push_back(r);
  if (hits.empty())
    throw std::invalid_argument("measured_file '" + sel.file.string() + "': no record with " + describe(sel) +
                                " (measured_part, measured_where)" + no_match_hint(all, sel) +
                                "; fix the selection or re-run that experiment");
  return hits;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_where(const std::vector<std::string>& entries,
                                                             const std::map<std::string, std::string>& options,
                                                             const std::string& option_name) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& entry : entries) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument(option_name + " entry '" + entry + "': expected key=value (key= for an absent key)");
    std::string value = entry.substr(eq + 1);
    for (std::size_t open = value.find('{'); open != std::string::npos; open = value.find('{', open)) {
      const auto close = value.find('}', open);
      if (close == std::string::npos)
        throw std::invalid_argument(option_name + " entry '" + entry + "': '{' without '}'");
      const std::string name = value.substr(open + 1, close - open - 1);
      const auto it = options.find(name);
      if (it == options.end())
        throw std::invalid_argument(option_name + " entry '" + entry + "': {" + name +
                                    "} is not an option of this task; use one of its options, e.g. {seq}");
      value.replace(open, close - open + 1, it->second);
      open += it->second.size();
    }
    out.emplace_back(entry.substr(0, eq), value);
  }
  return out;
}

MeasuredRecord find_measured(const RecordSelection& selection, const std::string& stat) {
  std::vector<StoredRecord> all;
  const std::vector<StoredRecord> hits = matching(selection, all);
  if (hits.size() > 1)
    throw std::invalid_argument("measured_file '" + selection.file.string() + "': " + std::to_string(hits.size()) +
                                " records match " + describe(selection) +
                                "; add a measured_where entry that tells them apart (e.g. rank= for the aggregate)");
  return reduce(hits.front(), stat);
}

std::vector<MeasuredRecord> find_all_measured(const RecordSelection& selection, const std::string& stat) {
  std::vector<StoredRecord> all;
  std::vector<MeasuredRecord> out;
  for (const StoredRecord& r : matching(selection, all)) out.push_back(reduce(r, stat));
  return out;
}

}  // namespace runner
