// `runner submit x.yaml --slurm --array N`: the sweep as a Slurm job array of shards and
// a job that merges them (`runner merge`, output/merge.hpp) once the array has ended.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace runner {

// `runner submit ...` (argv[1] is "submit"); returns the exit code (2 with one line on
// bad input). The jobs call the front binary `runner` beside this one when there is one.
int submit_verb(int argc, char** argv);
// The same with the flags after "submit"; `self` is the runner binary the jobs run.
int submit_command(const std::vector<std::string>& args, const std::filesystem::path& self);

}  // namespace runner
