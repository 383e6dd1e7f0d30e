// `runner submit x.yaml --slurm --array N`: the sweep as a Slurm job array, task I
// running shard I/N into <run>/shard-I (resuming it when a requeued task finds it
// started), and a job that waits for the array (afterany) and merges the shards
// into <run>/merged. Slurm schedules; the runner's records say what is done.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "distributed/submit.hpp"

#include "base/errors.hpp"
#include "base/stderr_line.hpp"
#include "output/environment.hpp"

namespace runner {
namespace fs = std::filesystem;
namespace {

const char* kSubmitHelp =
    "usage: runner submit <experiment.yaml | name> --slurm --array N [--parallel P] [--sbatch-arg ARG]...\n"
    "                     [--out RUN] [--dry-run] [run options: --set, --smoke, --device, --plugin-path ...]\n"
    "Submits the sweep as a Slurm job array of N tasks: task I runs `runner <experiment> --shard I/N --out\n"
    "RUN/shard-I` (with --resume RUN/shard-I when a requeued task finds its shard started, so only what is\n"
    "missing runs), at most P at a time; then a job that starts once the array has ended (afterany) runs\n"
    "`runner merge RUN/shard-* --out RUN/merged`, which also renders the reports. Prints both job ids and\n"
    "RUN (default runs/<experiment>/<UTC time>-array); the sbatch scripts and Slurm logs are in RUN/slurm/.\n"
    "--sbatch-arg passes one sbatch option to the array tasks (e.g. --sbatch-arg=--gres=gpu:1,\n"
    "--sbatch-arg=--time=2:00:00, --sbatch-arg=--requeue); --partition, --account and --qos also go to the\n"
    "merge job. --dry-run prints the two scripts and submits nothing.\n";

std::string quoted(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                           std::string::npos)
    return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Exit code and stdout of a shell command (with its stderr when `with_stderr`, else
// that goes to ours).
std::pair<int, std::string> run_command(const std::string& command, bool with_stderr = true) {
  std::array<char, 512> buf{};
  std::string out;
  FILE* pipe = popen((command + (with_stderr ? " 2>&1" : "")).c_str(), "r");
  if (!pipe) return {127, "cannot start: " + command};
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

int positive(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1)
    throw ConfigError("runner submit: " + flag + " '" + text + "': expected a whole number of 1 or more");
  return value;
}

struct Submission {
  bool slurm = false, dry_run = false;
  int array = 0, parallel = 0;
  std::vector<std::string> sbatch_args, run_args, plugin_paths;
  fs::path out;
};

Submission parse(const std::vector<std::string>& args) {
  Submission s;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&](const std::string& flag) -> std::string {
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      if (i + 1 >= args.size()) throw ConfigError("runner submit: " + flag + " needs a value (runner submit --help)");
      return args[++i];
    };
    const auto is = [&](const std::string& flag) { return a == flag || a.rfind(flag + "=", 0) == 0; };
    if (a == "--slurm") s.slurm = true;
    else if (a == "--dry-run") s.dry_run = true;
    else if (is("--array")) s.array = positive("--array", value("--array"));
    else if (is("--parallel")) s.parallel = positive("--parallel", value("--parallel"));
    else if (is("--sbatch-arg")) s.sbatch_args.push_back(value("--sbatch-arg"));
    else if (is("--out")) s.out = value("--out");
    else if (a == "-o") s.out = value("-o");
    else {
      for (const char* own : {"--shard", "--resume", "--filter", "--cfg", "--reports"})
        if (is(own))
          throw ConfigError(std::string("runner submit: ") + own + " is not for a submitted sweep (each task gets its "
                            "--shard and --out; a requeued task --resume); runner submit --help");
      if (is("--plugin-path")) {
        s.run_args.push_back("--plugin-path");
        s.plugin_paths.push_back(fs::absolute(value("--plugin-path")).string());
        s.run_args.push_back(s.plugin_paths.back());
        continue;
      }
      s.run_args.push_back(a);
    }
  }
  if (!s.slurm) throw ConfigError("runner submit: --slurm is required (Slurm is the scheduler it submits to)");
  if (s.array == 0) throw ConfigError("runner submit: --array N is required: the number of shards (array tasks)");
  if (s.run_args.empty()) throw ConfigError("runner submit: expected the experiment file (runner submit --help)");
  return s;
}

bool goes_to_merge_job(const std::string& sbatch_arg) {
  for (const char* flag : {"--partition", "-p", "--account", "-A", "--qos", "-q"})
    if (sbatch_arg == flag || sbatch_arg.rfind(std::string(flag) + "=", 0) == 0 ||
        (std::string(flag).size() == 2 && sbatch_arg.rfind(flag, 0) == 0))
      return true;
  return false;
}

std::string array_script(const Submission& s, const std::string& name, const fs::path& runner, const fs::path& run) {
  std::ostringstream text;
  const std::string n = std::to_string(s.array);
  text << "#!/bin/bash\n# Written by `runner submit --slurm`: task I runs shard I/" << n << " of " << name
       << "; a requeued task resumes its shard.\n"
       << "#SBATCH --job-name=runner-" << name << "\n#SBATCH --array=0-" << s.array - 1
       << (s.parallel ? "%" + std::to_string(s.parallel) : "") << "\n#SBATCH --chdir=" << fs::current_path().string()
       << "\n#SBATCH --output=" << (run / "slurm" / "shard-%a.log").string() << "\n#SBATCH --open-mode=append\n";
  for (const auto& a : s.sbatch_args) text << "#SBATCH " << a << "\n";
  std::string command = quoted(runner.string());
  for (const auto& a : s.run_args) command += " " + quoted(a);
  command += " --shard \"$SLURM_ARRAY_TASK_ID/" + n + "\"";
  text << "shard=" << quoted((run / "shard-").string()) << "\"$SLURM_ARRAY_TASK_ID\"\n"
       << "if [[ -f $shard/config.yaml ]]; then\n  exec " << command << " --resume \"$shard\"\nfi\n"
       << "exec " << command << " --out \"$shard\"\n";
  return text.str();
}

std::string merge_script(const Submission& s, const std::string& name, const fs::path& runner, const fs::path& run) {
  std::ostringstream text;
  text << "#!/bin/bash\n# Written by `runner submit --slurm`: merges the " << s.array << " shards of " << name
       << " once the array has ended (sbatch --dependency=afterany:<array job>).\n"
       << "#SBATCH --job-name=runner-" << name << "-merge\n#SBATCH --chdir=" << fs::current_path().string()
       << "\n#SBATCH --output=" << (run / "slurm" / "merge.log").string() << "\n";
  for (const auto& a : s.sbatch_args)
    if (goes_to_merge_job(a)) text << "#SBATCH " << a << "\n";
  text << "exec " << quoted(runner.string()) << " merge";
  for (int i = 0; i < s.array; ++i) text << " " << quoted((run / ("shard-" + std::to_string(i))).string());
  text << " --out " << quoted((run / "merged").string());
  for (const auto& p : s.plugin_paths) text << " --plugin-path " << quoted(p);
  text << "\n";
  return text.str();
}

std::string job_id(const std::string& sbatch_output) {
  std::string line = sbatch_output.substr(0, sbatch_output.find('\n'));
  line = line.substr(0, line.find(';'));  // --parsable: "<id>[;<cluster>]"
  if (line.empty() || line.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch did not print a job id: " + sbatch_output);
  return line;
}

}  // namespace

int submit_command(const std::vector<std::string>& args, const fs::path& self) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kSubmitHelp;
      return 0;
    }
  const Submission s = parse(args);
  // Everything a task would refuse, refused now: the same run options through --dry-run,
  // whose first line is "<experiment>: <points> points on <device>".
  std::string check = quoted(self.string());
  for (const auto& a : s.run_args) check += " " + quoted(a);
  const auto [code, output] = run_command(check + " --dry-run", false);
  if (code != 0) return code;  // its one-line error is on stderr already
  const std::string first = output.substr(0, output.find('\n'));
  const std::size_t colon = first.find(": ");
  const std::string name = first.substr(0, colon);
  const long points = colon == std::string::npos ? 0 : std::atol(first.c_str() + colon + 2);
  if (s.array > points)
    throw ConfigError("runner submit: --array " + std::to_string(s.array) + ": more tasks than the sweep's " +
                      std::to_string(points) + " points; use --array " + std::to_string(points) + " or fewer");
  const fs::path run = fs::absolute(s.out.empty() ? fs::path("runs") / name / (utc_timestamp(true) + "-array") : s.out);
  const std::string array = array_script(s, name, self, run), merge = merge_script(s, name, self, run);
  if (s.dry_run) {
    std::cout << "# " << (run / "slurm" / "array.sbatch").string() << "\n" << array << "\n# "
              << (run / "slurm" / "merge.sbatch").string() << "\n" << merge;
    return 0;
  }
  std::error_code ec;
  if (fs::exists(run, ec) && !fs::is_empty(run, ec))
    throw ConfigError("--out " + run.string() + ": exists and is not empty; a submitted sweep needs a new directory");
  fs::create_directories(run / "slurm", ec);
  if (ec) throw ConfigError("--out " + run.string() + ": cannot create it (" + ec.message() + ")");
  std::ofstream(run / "slurm" / "array.sbatch") << array;
  std::ofstream(run / "slurm" / "merge.sbatch") << merge;
  const auto [array_code, array_out] = run_command("sbatch --parsable " + quoted((run / "slurm" / "array.sbatch").string()));
  if (array_code != 0) throw ConfigError("runner submit: sbatch refused the array: " + array_out.substr(0, array_out.find('\n')));
  const std::string array_id = job_id(array_out);
  const auto [merge_code, merge_out] = run_command("sbatch --parsable --dependency=afterany:" + array_id + " " +
                                                   quoted((run / "slurm" / "merge.sbatch").string()));
  if (merge_code != 0)
    throw ConfigError("runner submit: sbatch refused the merge job (array job " + array_id + " is queued): " +
                      merge_out.substr(0, merge_out.find('\n')));
  const std::string merge_id = job_id(merge_out);
  std::cout << "array job " << array_id << ": " << s.array << " shards of " << points << " points into "
            << (run / "shard-<i>").string() << "\nmerge job " << merge_id << " (after the array ends): "
            << (run / "merged").string() << "\nfollow: squeue -j " << array_id << "," << merge_id << "; logs in "
            << (run / "slurm").string() << "/\n";
  std::ofstream(run / "slurm" / "jobs.txt") << "array " << array_id << "\nmerge " << merge_id << "\n";
  return 0;
}

int submit_verb(int argc, char** argv) {
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    std::error_code ec;
    const fs::path self = fs::canonical("/proc/self/exe", ec);
    const fs::path front = self.parent_path() / "runner";
    return submit_command(args, fs::exists(front, ec) ? front : self);
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    write_stderr_line(what.rfind("runner ", 0) == 0 ? what : "runner: " + what);
    return 2;
  } catch (const std::exception& e) {
    write_stderr_line(std::string("runner submit: ") + e.what());
    return 1;
  }
}

}  // namespace runner
