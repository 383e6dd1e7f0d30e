// The history verbs of the command line; main.cpp hands them their arguments
// (everything after the verb). Each returns the process exit code.
#pragma once
#include <string>
#include <vector>

namespace runner::history {

// runner history [--experiment X] [--since 7d] [--import DIR...] [--html DIR]
int history_command(const std::vector<std::string>& args);
// runner compare A B [--format table|markdown|json] ...: 1 on a regression, 2 on bad input.
int compare_command(const std::vector<std::string>& args);
// runner schedule <experiment.yaml> --every 24h | --list | --remove NAME | --run NAME
int schedule_command(const std::vector<std::string>& args, const std::string& runner_exe);
// runner bisect GOOD BAD --experiment X --filter POINT: `self` is this binary (the judge of each step).
int bisect_command(const std::vector<std::string>& args, const std::string& self);
// runner ab EXPERIMENT --a CMD --b CMD [--rounds 3]: two builds run alternately, then compared.
int ab_command(const std::vector<std::string>& args);

}  // namespace runner::history
