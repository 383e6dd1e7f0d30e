#include "run/run_many.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>

#include "base/errors.hpp"
#include "config/catalog.hpp"
#include "config/experiment.hpp"

namespace runner {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::string status_text(int code) {
  switch (code) {
    case 0: return "ok";
    case 1: return "failed points";
    case 2: return "bad input";
    default: return "exit " + std::to_string(code);
  }
}

}  // namespace

int run_experiments(const std::vector<std::filesystem::path>& files, const RunOptions& common,
                    const PluginRegistry& registry, std::ostream& out) {
  if (!common.resume.empty())
    throw ConfigError("--resume " + common.resume.string() +
                      ": continues one run; give one experiment with it (runner <experiment> --resume RUN_DIR)");
  std::vector<std::string> names;
  std::set<std::string> stems;
  for (const auto& file : files) {
    const ExperimentSpec exp = load_experiment(file, common.overrides, common.smoke);  // throws on bad input
    names.push_back(exp.name);
    if (!common.out.empty() && !stems.insert(file.stem().string()).second)
      throw ConfigError("--out " + common.out.string() + ": two experiment files named " + file.stem().string() +
                        ".yaml would share " + (common.out / file.stem()).string() + "; run them apart");
  }
  std::vector<std::vector<std::string>> rows = {{"experiment", "status", "seconds", "run directory"}};
  int worst = 0;
  size_t ok = 0;
  const auto all_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    std::cerr << "[" << i + 1 << "/" << files.size() << "] " << files[i].string() << "\n";
    RunOptions options = common;
    options.experiment = files[i];
    if (!common.out.empty()) options.out = common.out / files[i].stem();
    std::filesystem::path dir;
    int code = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      code = run_experiment(options, registry, &dir);
    } catch (const ConfigError& e) {
      std::cerr << "runner: " << e.what() << "\n";
      code = 2;
    } catch (const std::exception& e) {
      std::cerr << "runner: " << e.what() << "\n";
      code = 1;
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    worst = std::max(worst, code);
    ok += code == 0;
    rows.push_back({names[i], status_text(code), seconds_text(took),
                    common.dry_run ? "(dry run)" : dir.empty() ? "-" : dir.string()});
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - all_start).count();
  out << "\n";
  print_columns(rows, out);
  out << files.size() << " experiments in " << seconds_text(total) << "s (" << ok << " ok, " << files.size() - ok
      << " not)\n";
  return worst;
}

}  // namespace runner
