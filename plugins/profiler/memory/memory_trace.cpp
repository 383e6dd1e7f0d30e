#include "memory_trace.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace plugins::memory_profiler {
namespace {

std::int64_t delta_of(const TraceEvent& e) {
  if (e.kind == TraceEvent::Kind::alloc) return e.bytes;
  if (e.kind == TraceEvent::Kind::free) return -e.bytes;
  return 0;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    const std::size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

}  // namespace

Timeline active_memory(const std::vector<TraceEvent>& events, std::int64_t active_bytes_at_end) {
  std::int64_t total_change = 0;
  for (const TraceEvent& e : events) total_change += delta_of(e);
  std::int64_t level = active_bytes_at_end - total_change;
  Timeline t;
  t.peak_bytes = static_cast<double>(level);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (e.kind == TraceEvent::Kind::other) continue;
    level += delta_of(e);
    t.time_ms.push_back(e.time_ms);
    t.active_bytes.push_back(static_cast<double>(level));
    t.event_index.push_back(i);
    if (static_cast<double>(level) > t.peak_bytes) {
      t.peak_bytes = static_cast<double>(level);
      t.peak_where = e.where;
    }
  }
  return t;
}

std::string generalize_numbers(const std::string& path) {
  std::string out;
  for (const std::string& part : split_path(path)) {
    std::size_t digits_from = part.size();
    while (digits_from > 0 && std::isdigit(static_cast<unsigned char>(part[digits_from - 1]))) --digits_from;
    // Only a name followed by a number ("layer12", "step_3"); a bare number stays.
    const bool numbered = digits_from > 0 && digits_from < part.size();
    out += (out.empty() ? "" : "/") + (numbered ? part.substr(0, digits_from) + "*" : part);
  }
  return out;
}

std::vector<AllocationGroup> largest_allocations(const std::vector<TraceEvent>& events, std::size_t top_k,
                                                 bool group_numbered_ranges) {
  std::map<std::pair<std::int64_t, std::string>, AllocationGroup> groups;
  for (const TraceEvent& e : events) {
    if (e.kind != TraceEvent::Kind::alloc) continue;
    const std::string where = group_numbered_ranges ? generalize_numbers(e.where) : e.where;
    auto [it, inserted] = groups.try_emplace({e.bytes, where});
    if (inserted) {
      it->second.bytes = e.bytes;
      it->second.where = where;
      it->second.first_time_ms = e.time_ms;
    }
    ++it->second.count;
  }
  std::vector<AllocationGroup> out;
  for (auto& [key, group] : groups) out.push_back(group);
  std::sort(out.begin(), out.end(), [](const AllocationGroup& a, const AllocationGroup& b) {
    return std::make_tuple(-a.bytes, -a.count, a.where) < std::make_tuple(-b.bytes, -b.count, b.where);
  });
  if (out.size() > top_k) out.resize(top_k);
  return out;
}

std::string without_repetition(const std::string& path) {
  const std::string prefix = "repetition_";
  if (path.rfind(prefix, 0) != 0) return path;
  std::size_t end = prefix.size();
  while (end < path.size() && std::isdigit(static_cast<unsigned char>(path[end]))) ++end;
  if (end == prefix.size() || (end < path.size() && path[end] != '/')) return path;
  return end < path.size() ? path.substr(end + 1) : std::string();
}

std::vector<PhaseSpan> phase_spans(const std::vector<TraceEvent>& events, int depth) {
  std::vector<PhaseSpan> spans;
  std::string open_key;  // phase path of the open span, "" when none is open
  for (const TraceEvent& e : events) {
    const std::vector<std::string> parts = split_path(without_repetition(e.where));
    std::string key;
    if (depth > 0 && static_cast<int>(parts.size()) >= depth)
      for (int i = 0; i < depth; ++i) key += (i ? "/" : "") + parts[static_cast<std::size_t>(i)];
    if (!spans.empty() && !open_key.empty()) spans.back().end_ms = e.time_ms;
    if (key == open_key) continue;
    open_key = key;
    if (!key.empty()) spans.push_back({e.time_ms, e.time_ms, parts[static_cast<std::size_t>(depth - 1)]});
  }
  return spans;
}

std::string range_at(const std::vector<RangeMark>& marks, double time_us) {
  const auto after = std::upper_bound(marks.begin(), marks.end(), time_us,
                                      [](double t, const RangeMark& m) { return t < m.time_us; });
  return after == marks.begin() ? std::string() : std::prev(after)->path;
}

TraceEvent make_event(TraceEvent::Kind kind, std::int64_t bytes, double time_us, double first_time_us,
                      const std::string& tag, const std::vector<RangeMark>& marks) {
  constexpr double kUsPerMs = 1e3;
  TraceEvent e;
  e.kind = kind;
  e.bytes = bytes;
  e.time_ms = (time_us - first_time_us) / kUsPerMs;
  e.where = tag.empty() ? range_at(marks, time_us) : tag;
  return e;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace plugins::memory_profiler
