// A sweep split over several runs (`runner x.yaml --shard I/N`): shard I runs the
// points at sweep positions p (the order of --dry-run, over every enabled part) with
// p % N == I, so the split depends only on the resolved config. The shard is written
// into config.yaml's header, where `runner merge` and re-rendering read it.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/sweep.hpp"

namespace runner {

struct Shard {
  int index = 0;
  int count = 0;
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
  bool holds(std::size_t position) const { return static_cast<int>(position % static_cast<std::size_t>(count)) == index; }
  bool operator==(const Shard&) const = default;
};

// "I/N" with 0 <= I < N; ConfigError naming `what` (e.g. "--shard") otherwise.
Shard parse_shard(const std::string& text, const std::string& what = "--shard");

// The config.yaml header line of a shard, ending in a newline.
std::string shard_header(const Shard& shard);

// The shard a run directory's config.yaml names in its header, if any.
std::optional<Shard> shard_of_run(const std::filesystem::path& run_dir);

// Keeps the points of `shard` (by position in `points`); ConfigError when none remain.
void keep_shard_points(std::vector<Point>& points, const Shard& shard);

// How many of `total` sweep positions fall to `shard`.
std::size_t shard_size(std::size_t total, const Shard& shard);

}  // namespace runner
