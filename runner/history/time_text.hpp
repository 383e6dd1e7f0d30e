// UTC times as ISO 8601 text ("2026-11-23T09:45:00Z"), which sort as strings.
#pragma once
#include <string>

namespace runner::history {

std::string utc_now();
// "2026-11-01", "2026-11-01T12:00:00Z", or relative to now: "36h", "7d", "2w".
// Throws std::invalid_argument naming the accepted forms.
std::string parse_since(const std::string& text);
// "24h", "30m", "7d", "1w" in seconds; throws std::invalid_argument.
long parse_duration_seconds(const std::string& text, const std::string& what);

}  // namespace runner::history
