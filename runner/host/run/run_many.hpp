// Several experiment files in one command (`runner experiments/*.yaml`): each runs in
// turn, with the same flags and overrides, into its own run directory; one summary at
// the end; the exit code is the worst of theirs.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <vector>

#include "run/execute.hpp"

namespace runner {

// Loads every file first (with the overrides and --smoke), so a typo in the last one stops
// the command before the first one runs (ConfigError, exit 2). `common.out`, when set, is a
// parent: each run goes to <out>/<file stem>. `common.resume` is refused (it names one run).
// An experiment that fails to start (a ConfigError or another exception at run time) counts
// as exit 2 or 1 and the next one still runs. Prints "[i/N] <file>" to stderr before each
// and the summary table to `out` after the last.
int run_experiments(const std::vector<std::filesystem::path>& files, const RunOptions& common,
                    const PluginRegistry& registry, std::ostream& out);

}  // namespace runner
