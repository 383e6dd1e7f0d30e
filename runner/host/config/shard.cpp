#include "config/shard.hpp"

#include <charconv>
#include <fstream>

#include "base/errors.hpp"
#include "config/experiment.hpp"

namespace runner {
namespace {

constexpr const char* kHeader = "# shard ";
constexpr int kMaxShards = 100000;

bool parse_int(const std::string& text, int& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

Shard parse_shard(const std::string& text, const std::string& what) {
  const size_t slash = text.find('/');
  Shard s;
  if (slash == std::string::npos || !parse_int(text.substr(0, slash), s.index) ||
      !parse_int(text.substr(slash + 1), s.count) || s.count < 1 || s.count > kMaxShards || s.index < 0 ||
      s.index >= s.count)
    throw ConfigError(what + " '" + text + "': expected I/N, shard I (0 to N-1) of N, e.g. --shard 0/4");
  return s;
}

std::string shard_header(const Shard& shard) {
  return kHeader + shard.text() + ": the sweep's points at positions p with p % " + std::to_string(shard.count) +
         " == " + std::to_string(shard.index) + " (runner merge joins the shards)\n";
}

std::optional<Shard> shard_of_run(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "config.yaml");
  const std::string header = kHeader;
  for (std::string line; std::getline(in, line) && !line.empty() && line[0] == '#';) {
    if (line.rfind(header, 0) != 0) continue;
    const size_t colon = line.find(':', header.size());
    return parse_shard(line.substr(header.size(), colon == std::string::npos ? std::string::npos : colon - header.size()),
                       (run_dir / "config.yaml").string() + ": shard");
  }
  return std::nullopt;
}

void keep_shard_points(std::vector<Point>& points, const Shard& shard) {
  const std::size_t total = points.size();
  std::vector<Point> kept;
  for (std::size_t p = 0; p < total; ++p)
    if (shard.holds(p)) kept.push_back(std::move(points[p]));
  if (kept.empty())
    throw ConfigError("--shard " + shard.text() + ": holds no points (the sweep has " + std::to_string(total) +
                      "); use at most " + std::to_string(total) + " shards");
  points = std::move(kept);
}

std::size_t shard_size(std::size_t total, const Shard& shard) {
  const auto n = static_cast<std::size_t>(shard.count), i = static_cast<std::size_t>(shard.index);
  return total / n + (i < total % n ? 1 : 0);
}

}  // namespace runner
