#include "run/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace runner {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Columns a cell takes: UTF-8 continuation bytes ("±") take none.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

bool is_number(const Metric& m) { return !std::holds_alternative<std::string>(m.value); }

// One line of a failure message, cut to a terminal's width.
std::string one_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 160 ? line.substr(0, 157) + "..." : line;
}

}  // namespace

std::string format_duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else if (seconds < 10) std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

std::vector<std::string> headline_metrics(const Record& record) {
  std::vector<std::string> out;
  const auto timed = [](const Metric& m) { return std::holds_alternative<Stats>(m.value) && m.unit == "ms"; };
  for (const char* preferred : {"step_ms", "time_ms"})
    if (const Metric* m = record.find(preferred); m && timed(*m)) {
      out.push_back(preferred);
      break;
    }
  if (out.empty())
    for (const auto& [name, m] : record.metrics)
      if (timed(m)) {
        out.push_back(name);
        break;
      }
  for (const auto& [name, m] : record.metrics)
    if (out.size() < 3 && is_number(m) && m.unit.size() > 2 && m.unit.compare(m.unit.size() - 2, 2, "/s") == 0)
      out.push_back(name);
  if (out.empty())
    for (const auto& [name, m] : record.metrics)
      if (out.size() < 3 && is_number(m)) out.push_back(name);
  return out;
}

std::string metric_text(const Metric& m) {
  const std::string unit = m.unit.empty() ? "" : " " + m.unit;
  if (const auto* s = std::get_if<Stats>(&m.value)) {
    std::string text = number(s->median) + unit;
    if (s->n >= 2) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " ±%.2g%%", 100 * s->rel_stderr());
      text += buf;
    }
    return text;
  }
  if (const auto* d = std::get_if<double>(&m.value)) return number(*d) + unit;
  return std::get<std::string>(m.value);
}

Progress::Progress(int total, std::FILE* results, std::FILE* status)
    : total_(total),
      tty_(total > 0 && isatty(fileno(status)) != 0),
      results_(results),
      status_(status),
      start_(std::chrono::steady_clock::now()) {
  if (total_ > 0) ticker_ = std::thread([this] { heartbeat(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::status_line(double point_seconds) {
  const double elapsed = seconds_since(start_);
  // Points finished so far tell the pace; inside a long first point its own time does.
  const std::string eta = done_ > 0 ? format_duration(elapsed / done_ * (total_ - done_)) : "?";
  std::string running;
  if (point_seconds >= 1) running = ", this point " + format_duration(point_seconds);
  if (tty_) {
    std::fprintf(status_, "\r\033[K[%d/%d] %s  (ETA %s%s)", index_ + 1, total_, label_.c_str(), eta.c_str(),
                 running.c_str());
  } else if (point_seconds < 1) {
    std::fprintf(status_, "[%d/%d] %s  (ETA %s)\n", index_ + 1, total_, label_.c_str(), eta.c_str());
  } else {
    std::fprintf(status_, "  still running [%d/%d] %s: %s\n", index_ + 1, total_, label_.c_str(),
                 format_duration(point_seconds).c_str());
  }
  std::fflush(status_);
}

// A point may run for minutes (a big matmul on a CPU): the line keeps counting.
void Progress::heartbeat() {
  std::unique_lock<std::mutex> lock(mutex_);
  int reported = 0, reported_point = -1;  // half-minutes of a point already reported (not a terminal)
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_ || !in_point_) continue;
    const double in_point = seconds_since(point_start_);
    if (index_ != reported_point) {
      reported = 0;
      reported_point = index_;
    }
    if (tty_) {
      status_line(in_point);
    } else if (static_cast<int>(in_point / 30) > reported) {
      reported = static_cast<int>(in_point / 30);
      status_line(in_point);
    }
  }
}

void Progress::begin_point(int index, const std::string& label) {
  if (total_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  index_ = index;
  label_ = label;
  point_start_ = std::chrono::steady_clock::now();
  in_point_ = true;
  status_line(0);
}

void Progress::end_point(RecordStatus status, const std::vector<Record>& records, const std::string& message) {
  if (total_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  in_point_ = false;
  ++done_;
  const double took = seconds_since(point_start_);
  if (tty_) std::fprintf(status_, "\r\033[K");
  std::fflush(status_);
  Row row{label_, status_name(status), {}};
  std::string line = "[" + std::to_string(index_ + 1) + "/" + std::to_string(total_) + "] " + label_ + "  " + row.status;
  if (status == RecordStatus::ok && !records.empty()) {
    for (const std::string& name : headline_metrics(records.front())) {
      const std::string text = metric_text(*records.front().find(name));
      row.cells.emplace_back(name, text);
      line += "  " + name + " " + text;
    }
    if (records.size() > 1) line += "  (+" + std::to_string(records.size() - 1) + " records)";
  } else if (!message.empty()) {
    line += ": " + one_line(message);
  }
  line += "  (" + format_duration(took) + ")";
  std::fprintf(results_, "%s\n", line.c_str());
  std::fflush(results_);
  rows_.push_back(std::move(row));
}

// The closing table: one row per point, a column per headline metric.
void Progress::finish() {
  if (total_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (tty_) std::fprintf(status_, "\r\033[K");
  std::fflush(status_);
  std::vector<std::string> columns;
  for (const Row& r : rows_)
    for (const auto& [name, _] : r.cells)
      if (columns.size() < 4 && std::find(columns.begin(), columns.end(), name) == columns.end())
        columns.push_back(name);
  std::vector<std::vector<std::string>> table = {{"point", "status"}};
  table[0].insert(table[0].end(), columns.begin(), columns.end());
  std::map<std::string, int> statuses;
  for (const Row& r : rows_) {
    ++statuses[r.status];
    std::vector<std::string> cells = {r.label, r.status};
    for (const auto& c : columns) {
      auto it = std::find_if(r.cells.begin(), r.cells.end(), [&](const auto& cell) { return cell.first == c; });
      cells.push_back(it == r.cells.end() ? "-" : it->second);
    }
    table.push_back(std::move(cells));
  }
  std::string counts;
  for (const auto& [status, n] : statuses) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  if (!rows_.empty()) {
    std::vector<size_t> width(table[0].size(), 0);
    for (const auto& row : table)
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
    std::fprintf(results_, "\n");
    for (size_t r = 0; r < table.size(); ++r) {
      std::string line;
      for (size_t i = 0; i < table[r].size(); ++i) {
        // Labels line up on the left, numbers on the right.
        const std::string& cell = table[r][i];
        const std::string pad(width[i] - display_width(cell), ' ');
        line += i < 2 ? cell + (i + 1 < table[r].size() ? pad : "") : pad + cell;
        if (i + 1 < table[r].size()) line += "  ";
      }
      std::fprintf(results_, "%s\n", line.c_str());
    }
  }
  std::fprintf(results_, "%d point%s in %s%s\n", done_, done_ == 1 ? "" : "s", format_duration(seconds_since(start_)).c_str(),
               counts.empty() ? "" : (" (" + counts + ")").c_str());
  std::fflush(results_);
}

}  // namespace runner
