// Starting the helper programs reports use (the plotting script, latexmk) without a shell.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace runner::report::detail {

// Runs argv[0] (searched on PATH) with stdout and stderr into `log`, in `cwd` when
// given; returns the exit status, or -1 when the program could not be started.
int run_program(const std::vector<std::string>& argv, const std::filesystem::path& log,
                const std::filesystem::path& cwd = {});
// The last non-blank line of a program's log, "" when there is none.
std::string last_log_line(const std::filesystem::path& log);

}  // namespace runner::report::detail
