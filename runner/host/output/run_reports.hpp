// The reports of runs: written at the end of a run from its results.jsonl, and
// written again later from stored run directories (`runner report`), where several
// runs of one experiment merge into one report.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "report/report.hpp"

namespace runner {

// Every report of `specs` (an experiment's, ExperimentSpec::reports) from the records in
// `results`, into each of `reports_dirs`; `experiment_file` is named by a value's mistake.
void write_run_reports(const std::vector<report::ReportSpec>& specs, const std::string& experiment_file,
                       const std::filesystem::path& results, const std::vector<std::filesystem::path>& reports_dirs,
                       const report::RunSummary& run);

// Re-renders the reports of finished runs from their stored configs and records;
// several runs of one experiment (same report spec) merge into one report. A non-empty
// spec_file (an experiment YAML of the same experiment) supplies the report spec instead,
// so records taken before a table or column was added render with it.
// allow_dirty: records of an unclean commit may fill the project's reports (captions say so).
int render_reports(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& reports_dir,
                   const std::filesystem::path& spec_file = {}, bool allow_dirty = false);

// Throws ConfigError when `reports_dir` is the project's committed reports (report::
// is_committed_reports), the records name an unclean commit (report::unclean_commits) and
// `run` does not allow it (--allow-dirty). `from`: the records' file(s), for the message.
void refuse_unclean(const std::vector<StoredRecord>& records, const std::filesystem::path& reports_dir,
                    const report::RunSummary& run, const std::string& from);

// Smoke flag from a run's config.yaml header, planned points counted from its sweeps
// (0 when config.yaml cannot be read).
report::RunSummary run_summary(const std::filesystem::path& run_dir);

}  // namespace runner
