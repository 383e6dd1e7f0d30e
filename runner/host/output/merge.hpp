// `runner merge` joins the shards of one sweep (`runner x.yaml --shard I/N`) into one
// run directory; `runner submit --slurm` (dist/submit.hpp) runs the shards as a Slurm
// job array whose last job calls it. It reads its own flags.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace runner {

class PluginRegistry;

// `runner merge ...` (argv[1] is "merge"); returns the exit code (2 with one line on
// bad input).
int merge_verb(int argc, char** argv);

// Joins the shard run directories `shards` into the new run directory `out`: the
// config.yaml they share, every point's last whole records in sweep order (as an
// unsharded run writes them), the points' artifacts, each shard's log, and the
// reports (into out/reports and `reports_dir` when set). Throws ConfigError on
// shards of different configs or commits, overlapping or missing shards, and a
// shard without a finished record for one of its points, and, before writing anything, on
// records of an unclean commit for the project's reports (`reports_dir` holds renders.txt)
// unless `allow_dirty`, which every caption then states (as `runner report --allow-dirty`).
void merge_shards(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& out,
                  const std::filesystem::path& reports_dir, const PluginRegistry& registry, std::ostream& log,
                  bool allow_dirty = false);


}  // namespace runner
