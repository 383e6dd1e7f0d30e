// `runner bisect GOOD BAD --experiment X --filter POINT`: finds the first commit
// at which one point regresses. It measures the point at GOOD once (the
// baseline), checks that BAD regresses against it, then lets `git bisect run`
// drive `runner bisect --step` at each commit: build, run the one point, and
// compare with the baseline (exit 0 good, 1 bad, 125 skip when the build or the
// run fails to produce the point). The compare is this binary copied aside
// first, so a checkout that rebuilds build/runner does not change the judge.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <boost/program_options.hpp>

#include "history/command_line.hpp"
#include "history/shell.hpp"
#include "history/cli.hpp"
#include "history/compare.hpp"

namespace runner::history {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: runner bisect GOOD BAD --experiment FILE --filter POINT [--build CMD] [--runner PATH]\n"
    "                     [--set k=v]... [--device cpu|cuda] [--threshold 0.05] [--alpha 0.05] [--work DIR]\n"
    "  Run in the repository's work tree (clean). Measures the point at GOOD, checks that BAD\n"
    "  regresses against it, then `git bisect run`s build + point + compare and prints the first\n"
    "  bad commit. --build defaults to `cmake --build build --target runner`, --runner to build/runner;\n"
    "  the runs go to --work (default: a new directory under $TMPDIR), never to the history.\n";

// A shell command's exit code and its stdout without the trailing newline (git's answers).
int shell(const std::string& cmd, std::string* output = nullptr) {
  const int code = run_shell(cmd, output);
  if (output)
    while (!output->empty() && (output->back() == '\n' || output->back() == ' ')) output->pop_back();
  return code;
}

struct Settings {
  std::string experiment, filter, build, runner, device, work;
  std::vector<std::string> overrides;
  CompareOptions compare;
};

// Builds the checked-out commit and runs the point into `out`: 0 when the
// point was recorded, else a one-line reason.
std::string build_and_run(const Settings& s, const fs::path& out) {
  const fs::path log = out.string() + ".log";
  if (shell(s.build + " > " + shell_quote(log.string()) + " 2>&1") != 0) return "the build failed (" + log.string() + ")";
  std::string cmd = shell_quote(s.runner) + " " + shell_quote(s.experiment) + " --filter " + shell_quote(s.filter) + " --out " +
                    shell_quote(out.string()) + " --history off";
  for (const auto& o : s.overrides) cmd += " --set " + shell_quote(o);
  if (!s.device.empty()) cmd += " --device " + s.device;
  const int code = shell(cmd + " >> " + shell_quote(log.string()) + " 2>&1");
  if (code == 2 || !fs::exists(out / "results.jsonl")) return "the run did not record the point (" + log.string() + ")";
  return "";
}

// 1 when the point at `candidate` regressed against `baseline`, 0 when not,
// 125 when they share no point.
int judge(const Settings& s, const fs::path& baseline, const fs::path& candidate, std::string& summary) {
  try {
    Comparison c = compare(resolve_side(baseline.string(), nullptr, nullptr, ""),
                           resolve_side(candidate.string(), nullptr, nullptr, ""), s.compare);
    summary = verdict_counts(c);
    for (const auto& r : c.rows)
      if (r.gating && r.metric != "status")
        summary += "; " + r.metric + " " + std::to_string(r.a) + " -> " + std::to_string(r.b) + " " + r.unit;
    return c.regression() ? 1 : 0;
  } catch (const std::exception& e) {
    summary = e.what();
    return 125;
  }
}

}  // namespace

int bisect_command(const std::vector<std::string>& args, const std::string& self) {
  po::options_description flags("bisect options");
  flags.add_options()("help,h", "show this help")
      ("experiment,e", po::value<std::string>(), "experiment file (path in the repository)")
      ("filter", po::value<std::string>(), "the one point (a --filter regex of the run)")
      ("build", po::value<std::string>()->default_value("cmake --build build --target runner"), "build command at each commit")
      ("runner", po::value<std::string>()->default_value("build/runner"), "the runner the build makes")
      ("set,s", po::value<std::vector<std::string>>()->composing(), "override of each run (repeatable)")
      ("device", po::value<std::string>(), "cpu or cuda")
      ("threshold", po::value<double>()->default_value(0.05, "0.05"), "compare: relative noise threshold")
      ("alpha", po::value<double>()->default_value(0.05, "0.05"), "compare: significance level")
      ("work", po::value<std::string>(), "directory for the runs (default: new under $TMPDIR)")
      ("step", "one bisect step (what `git bisect run` calls)")
      ("baseline", po::value<std::string>(), "step: the GOOD run directory");
  ParsedCommandLine parsed;
  int code = 0;
  if (!parse_command_line(args, flags, "bisect", kUsage, parsed, code)) return code;
  const po::variables_map& vm = parsed.vm;
  Settings s;
  s.experiment = vm.count("experiment") ? vm["experiment"].as<std::string>() : "";
  s.filter = vm.count("filter") ? vm["filter"].as<std::string>() : "";
  s.build = vm["build"].as<std::string>();
  s.runner = fs::absolute(vm["runner"].as<std::string>()).string();
  s.device = vm.count("device") ? vm["device"].as<std::string>() : "";
  if (vm.count("set")) s.overrides = vm["set"].as<std::vector<std::string>>();
  s.compare.threshold = vm["threshold"].as<double>();
  s.compare.alpha = vm["alpha"].as<double>();
  if (s.experiment.empty() || s.filter.empty()) {
    std::cerr << "runner bisect: give --experiment FILE and --filter POINT (one point: bisect times one)\n" << kUsage;
    return 2;
  }
  std::string head;
  if (vm.count("step")) {
    // Called by `git bisect run` at each commit; the baseline stays put.
    if (!vm.count("baseline") || !vm.count("work")) {
      std::cerr << "runner bisect --step: needs --baseline and --work\n";
      return 128;  // aborts the bisect
    }
    shell("git rev-parse --short=12 HEAD", &head);
    const fs::path out = fs::path(vm["work"].as<std::string>()) / head;
    fs::remove_all(out);
    const std::string why = build_and_run(s, out);
    if (!why.empty()) {
      std::cout << "bisect: " << head << ": skipped, " << why << "\n";
      return 125;
    }
    std::string summary;
    const int verdict = judge(s, vm["baseline"].as<std::string>(), out, summary);
    std::cout << "bisect: " << head << ": " << (verdict == 1 ? "bad" : verdict == 0 ? "good" : "skipped") << " ("
              << summary << ")\n";
    return verdict;
  }
  const std::vector<std::string>& positional = parsed.positional;
  if (positional.size() != 2) {
    std::cerr << "runner bisect: expected GOOD and BAD commits\n" << kUsage;
    return 2;
  }
  std::string good, bad, top, dirty, branch;
  if (shell("git rev-parse --show-toplevel 2>/dev/null", &top) != 0) {
    std::cerr << "runner bisect: " << fs::current_path().string() << " is not in a git work tree\n";
    return 2;
  }
  fs::current_path(top);
  if (shell("git rev-parse --verify -q " + shell_quote(positional[0] + "^{commit}"), &good) != 0 ||
      shell("git rev-parse --verify -q " + shell_quote(positional[1] + "^{commit}"), &bad) != 0) {
    std::cerr << "runner bisect: " << positional[0] << " or " << positional[1] << " is not a commit of " << top << "\n";
    return 2;
  }
  shell("git status --porcelain --untracked-files=no", &dirty);
  if (!dirty.empty()) {
    std::cerr << "runner bisect: " << top << " has uncommitted changes; commit or stash them (bisect checks out commits)\n";
    return 2;
  }
  if (shell("git symbolic-ref -q --short HEAD", &branch) != 0) shell("git rev-parse HEAD", &branch);
  std::string work = vm.count("work") ? vm["work"].as<std::string>() : "";
  if (work.empty()) {
    std::string made;
    shell("mktemp -d \"${TMPDIR:-/tmp}/runner-bisect.XXXXXX\"", &made);
    work = made;
  }
  work = fs::absolute(work).string();
  fs::create_directories(work);
  // The judge, copied out of the tree the checkouts rewrite.
  const fs::path judge_exe = fs::path(work) / "runner-judge";
  fs::copy_file(self, judge_exe, fs::copy_options::overwrite_existing);
  auto restore = [&] { shell("git checkout -q " + shell_quote(branch) + " 2>/dev/null"); };
  auto measure = [&](const std::string& commit, const std::string& name) {
    shell("git checkout -q " + shell_quote(commit) + " 2>&1");
    const fs::path out = fs::path(work) / name;
    fs::remove_all(out);
    return std::make_pair(out, build_and_run(s, out));
  };
  std::cout << "bisect: measuring " << s.filter << " at GOOD " << good.substr(0, 12) << " and BAD " << bad.substr(0, 12)
            << " (runs in " << work << ")\n" << std::flush;
  const auto [good_dir, good_why] = measure(good, "good");
  if (!good_why.empty()) {
    restore();
    std::cerr << "runner bisect: at GOOD " << positional[0] << ": " << good_why << "\n";
    return 2;
  }
  const auto [bad_dir, bad_why] = measure(bad, "bad");
  std::string summary;
  const int bad_verdict = bad_why.empty() ? judge(s, good_dir, bad_dir, summary) : 125;
  restore();
  if (bad_verdict != 1) {
    std::cerr << "runner bisect: BAD " << positional[1] << " does not regress against GOOD " << positional[0]
              << " at this point (" << (bad_why.empty() ? summary : bad_why) << "): nothing to bisect\n";
    return 2;
  }
  std::cout << "bisect: BAD regresses (" << summary << ")\n" << std::flush;
  std::string step = shell_quote(judge_exe.string()) + " bisect --step --baseline " + shell_quote(good_dir.string()) + " --work " +
                     shell_quote(work) + " --experiment " + shell_quote(s.experiment) + " --filter " + shell_quote(s.filter) +
                     " --build " + shell_quote(s.build) + " --runner " + shell_quote(s.runner) + " --threshold " +
                     std::to_string(s.compare.threshold) + " --alpha " + std::to_string(s.compare.alpha);
  for (const auto& o : s.overrides) step += " --set " + shell_quote(o);
  if (!s.device.empty()) step += " --device " + s.device;
  std::string output, first;
  shell("git bisect start " + shell_quote(bad) + " " + shell_quote(good) + " >/dev/null 2>&1 && git bisect run " + step + " 2>&1",
        &output);
  std::cout << output << "\n";
  const bool found = output.find("is the first bad commit") != std::string::npos &&
                     shell("git rev-parse refs/bisect/bad", &first) == 0;
  std::string subject;
  if (found) shell("git log -1 --format='%h %s' " + shell_quote(first), &subject);
  shell("git bisect reset -q >/dev/null 2>&1");
  restore();
  if (!found) {
    std::cerr << "runner bisect: git bisect found no first bad commit (skipped commits or a flaky point; see above)\n";
    return 1;
  }
  std::cout << "first bad commit: " << first << " (" << subject << ")\n";
  return 0;
}

}  // namespace runner::history
