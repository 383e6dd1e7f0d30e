#include "output/run_reports.hpp"

#include <fstream>
#include <iostream>
#include <optional>

#include "config/experiment.hpp"
#include "config/shard.hpp"
#include "config/sweep.hpp"

namespace runner {
namespace {

std::string lower_first(std::string text) {
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

// How a value's text names a merged run: reports/<experiment>/data is "<experiment>/data",
// reports/<experiment>/runs/<name> "<experiment>/runs/<name>", anything else its folder's name
// (the same text whichever path, relative or absolute, named the run).
std::string run_name(const std::filesystem::path& run_dir) {
  const std::filesystem::path dir = run_dir.lexically_normal().filename().empty()
                                        ? run_dir.lexically_normal().parent_path()
                                        : run_dir.lexically_normal();
  if (dir.filename() == "data") return (dir.parent_path().filename() / "data").string();
  if (dir.parent_path().filename() == "runs")
    return (dir.parent_path().parent_path().filename() / "runs" / dir.filename()).string();
  return dir.filename().string();
}

}  // namespace

void refuse_unclean(const std::vector<StoredRecord>& records, const std::filesystem::path& reports_dir,
                    const report::RunSummary& run, const std::string& from) {
  if (run.allow_dirty || !report::is_committed_reports(reports_dir)) return;
  const auto unclean = report::unclean_commits(records);
  if (unclean.empty()) return;
  std::string named;
  for (const auto& c : unclean) named += (named.empty() ? "" : ", ") + c;
  throw ConfigError(from + ": records of commit " + named + " (uncommitted changes or no commit) for " +
                    reports_dir.string() + ", the project's reports, which only clean commits fill; commit, measure "
                    "again and render, or pass --allow-dirty so every caption says so");
}

namespace {

// `file`: where the specs come from, named by a value's mistake found only with the records
// (a filter that keeps no row).
// `from`: where the records come from, for the refusal of unclean ones.
void write_reports(const std::vector<report::ReportSpec>& specs, const std::vector<StoredRecord>& records,
                   const std::vector<std::filesystem::path>& reports_dirs, const report::RunSummary& run,
                   const std::string& file, const std::string& from) {
  for (const auto& dir : reports_dirs) refuse_unclean(records, dir, run, from);
  for (const auto& dir : reports_dirs) {
    std::filesystem::create_directories(dir);
    for (const auto& spec : specs) {
      try {
        for (const auto& path : report::write_report(spec, records, dir, run))
          std::cerr << "wrote " << path.string() << "\n";
      } catch (const report::SpecError& e) {
        if (std::string(e.what()).rfind("report " + spec.id + ": value '", 0) == 0)
          throw report::SpecError(file + ": " + e.what());
        throw;
      }
    }
  }
}

}  // namespace

void write_run_reports(const std::vector<report::ReportSpec>& specs, const std::string& experiment_file,
                       const std::filesystem::path& results, const std::vector<std::filesystem::path>& reports_dirs,
                       const report::RunSummary& run) {
  if (specs.empty()) return;
  const auto records = report::read_results(results);
  if (const std::string about = report::run_sentence(run, records); !about.empty())
    std::cerr << "warning: " << results.parent_path().string() << ": " << lower_first(about) << "\n";
  write_reports(specs, records, reports_dirs, run, experiment_file, results.string());
}

int render_reports(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& reports_dir,
                   const std::filesystem::path& spec_file, bool allow_dirty) {
  if (run_dirs.empty()) throw ConfigError("runner report: expected a run directory (runner report --help)");
  // Several runs of one experiment (e.g. `runner launch` with 2, 4 and 6 processes)
  // fill one report: same experiment, same report spec; the first run's spec renders
  // unless --spec names the experiment file whose report spec renders all of them.
  std::optional<ExperimentSpec> spec;
  std::optional<StoredRunConfig> first;
  std::string first_name, first_config;
  if (!spec_file.empty()) {
    spec = load_experiment(spec_file, {}, false);
    if (!spec->has_report)
      throw ConfigError("--spec " + spec_file.string() + ": the experiment declares no report: tables");
    first_name = spec->name;
    first_config = spec_file.string();
  }
  std::vector<StoredRecord> records;
  report::RunSummary summary;
  summary.allow_dirty = allow_dirty;
  std::string from;
  for (std::size_t i = 0; i < run_dirs.size(); ++i) {
    from += (i ? ", " : "") + (run_dirs[i] / "results.jsonl").string();
    const auto& run_dir = run_dirs[i];
    const auto config = run_dir / "config.yaml";
    const auto results = run_dir / "results.jsonl";
    if (!std::filesystem::exists(config) || !std::filesystem::exists(results))
      throw ConfigError(run_dir.string() + ": not a run directory (needs config.yaml and results.jsonl)");
    const StoredRunConfig stored(config);
    if (!stored.has_report && spec_file.empty())
      throw ConfigError(config.string() + ": the experiment declares no report: tables");
    if (!spec_file.empty()) {
      if (stored.experiment_name != first_name)
        throw ConfigError(config.string() + ": a run of another experiment than --spec " + spec_file.string() +
                          " (experiment: " + first_name + "); pass the experiment file that made it");
    } else if (i == 0) {
      first = stored;
      first_config = config.string();
    } else if (stored.experiment_text != first->experiment_text || stored.report_text != first->report_text) {
      throw ConfigError(config.string() + ": not the experiment or report spec of " + first_config +
                        "; only runs of one experiment with the same report merge into one report (or render "
                        "them all with --spec experiments/<name>.yaml)");
    }
    const report::RunSummary run = run_summary(run_dir);
    auto run_records = report::read_results(results);
    if (const std::string about = report::run_sentence(run, run_records); !about.empty())
      std::cerr << "warning: " << run_dir.string() << ": " << lower_first(about) << "\n";
    summary.smoke = summary.smoke || run.smoke;
    summary.planned_points += run.planned_points;
    for (auto& r : run_records) {
      if (run_dirs.size() > 1) {
        r.observed[report::kSourceRunKey] = static_cast<long long>(i);
        r.observed[report::kSourceRunNameKey] = run_name(run_dir);
      }
      records.push_back(std::move(r));
    }
  }
  write_reports(spec ? spec->reports() : first->report_specs(), records, {reports_dir}, summary, first_config, from);
  return 0;
}

report::RunSummary run_summary(const std::filesystem::path& run_dir) {
  report::RunSummary summary;
  const auto config = run_dir / "config.yaml";
  std::ifstream in(config);
  std::string first_line;
  std::getline(in, first_line);
  summary.smoke = config_header_marks_smoke(first_line);
  try {
    summary.planned_points = count_points(load_experiment(config, {}, false));
    if (const auto shard = shard_of_run(run_dir)) summary.planned_points = shard_size(summary.planned_points, *shard);
  } catch (const std::exception&) {
    summary.planned_points = 0;  // an older or hand-edited config: no partial-run check
  }
  return summary;
}

}  // namespace runner
