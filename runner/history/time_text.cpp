#include "history/time_text.hpp"

#include <chrono>
#include <ctime>
#include <regex>
#include <stdexcept>

namespace runner::history {
namespace {

std::string format_utc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string utc_now() { return format_utc(std::time(nullptr)); }

long parse_duration_seconds(const std::string& text, const std::string& what) {
  static const std::regex form(R"(^([0-9]+)\s*(s|m|min|h|d|w)$)");
  std::smatch m;
  if (!std::regex_match(text, m, form) || std::stol(m[1]) <= 0)
    throw std::invalid_argument(what + " '" + text + "': expected a positive duration like 30m, 6h, 24h, 7d or 1w");
  const long n = std::stol(m[1]);
  const std::string unit = m[2];
  if (unit == "s") return n;
  if (unit == "m" || unit == "min") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  return n * 7 * 86400;
}

std::string parse_since(const std::string& text) {
  static const std::regex date(R"(^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?$)");
  if (std::regex_match(text, date)) return text;
  try {
    return format_utc(std::time(nullptr) - parse_duration_seconds(text, "--since"));
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("--since '" + text + "': expected a date (2026-11-01, 2026-11-01T12:00Z) or an age (36h, 7d, 2w)");
  }
}

}  // namespace runner::history
