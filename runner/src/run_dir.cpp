#include "run_dir.hpp"

#include <fstream>

#include "config.hpp"
#include "sweep.hpp"

namespace runner {
namespace {
constexpr const char* kSmokeMark = " with --smoke";
}

std::string config_header(const std::filesystem::path& experiment_file, bool smoke) {
  return "# resolved from " + experiment_file.string() + (smoke ? kSmokeMark : "") + "\n";
}

report::RunSummary run_summary(const std::filesystem::path& run_dir) {
  report::RunSummary summary;
  const auto config = run_dir / "config.yaml";
  std::ifstream in(config);
  std::string first_line;
  std::getline(in, first_line);
  summary.smoke = first_line.rfind("# resolved from ", 0) == 0 && first_line.size() >= std::string(kSmokeMark).size() &&
                  first_line.compare(first_line.size() - std::string(kSmokeMark).size(), std::string::npos, kSmokeMark) == 0;
  try {
    summary.planned_points = count_points(load_experiment(config, {}, false));
  } catch (const std::exception&) {
    summary.planned_points = 0;  // an older or hand-edited config: no partial-run check
  }
  return summary;
}

std::set<std::pair<std::string, int>> finished_points(const std::filesystem::path& results_jsonl) {
  std::set<std::pair<std::string, int>> done;
  if (!std::filesystem::exists(results_jsonl)) return done;
  std::vector<std::string> warnings;
  for (const auto& record : report::read_results(results_jsonl, &warnings)) {
    if (record.value("status", std::string()) == "interrupted") continue;
    const auto point = record.find("point");
    if (point == record.end() || !point->is_number_integer()) continue;
    done.emplace(record.value("part", std::string()), point->get<int>());
  }
  return done;
}

}  // namespace runner
