// An experiment file as one typed object: what runs (one or more parts, each a task
// with fixed options and sweep axes), how it is measured, where, on how many processes,
// which reports it writes and under which history key. Parsed once, after `include:`,
// --smoke and --set (config_load.cpp, config_overrides.cpp); everything downstream reads
// this object, not the YAML.
//
// Top-level keys: experiment, description, question, device, seed, precision, measure,
// profilers, task, params, sweep, parts, smoke, report, history, processes, include. A
// file without `parts` is one part named "main" built from task/params/sweep. Part
// entries override the top-level seed/precision/measure/profilers.
#pragma once
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config_load.hpp"
#include "report/report.hpp"

namespace runner {

// One factor of a part's sweep: the alternatives it steps through, each setting one
// path (an axis) or several at once (a zip group) to an option value.
using AxisSetting = std::pair<std::string, OptionTree>;
using SweepAlternative = std::vector<AxisSetting>;
using SweepFactor = std::vector<SweepAlternative>;

struct PartSpec {
  std::string name;  // "main" for a file without parts
  bool enabled = true;
  std::string task;        // task plugin name
  std::string task_where;  // file:line:col of `task:`
  // Options as written, resolved against the plugins' declared options when the sweep
  // expands (sweep.cpp); the top-level defaults are merged in (measure key by key).
  OptionTree params, measure, profilers;
  OptionTree precision_seed;  // {precision, seed}, each only where written
  std::vector<SweepFactor> sweep;  // in declaration order; the last varies fastest
  // The part's own `processes:` (a sweep mixing 1-rank and N-rank points); 0 when given
  // but not an integer >= 1. Only parts of a `parts:` list have one.
  bool has_processes = false;
  int processes = 0;
  std::string processes_where;
  // Points the sweep makes (product of the factors' lengths), saturating at SIZE_MAX.
  std::size_t point_count() const;
};

// A name a report looks records up by, and where the file writes it: checked against
// what the points will record before anything runs (report_spec_check.cpp).
struct RecordName {
  bool metric = false;  // a metric, else a parameter or label key
  std::string name, path, where;
};
// A table or figure of a report: the parts whose records it reads (none = all) and the
// names it uses, in the order they are checked.
struct ReportReader {
  std::string path;  // "report.tables[0]", "report[1].figures[0]"
  bool figure = false;
  report::PartSelection parts;  // `part:` one name or a list
  std::string part_where;
  std::vector<RecordName> names;
};

struct ExperimentSpec {
  std::filesystem::path file;
  std::string name;
  std::string description;  // "" when none
  std::string question;     // the course question answered ("" when none)
  std::string device;       // as written ("" when the file names none); checked when a run picks one
  std::string device_where;
  bool has_smoke = false;  // the file has `smoke:` overrides
  // processes: the ranks the experiment needs; 0 when given but not an integer >= 1.
  bool has_processes = false;
  int processes = 1;
  std::string processes_where;
  std::string history;  // the history key ("" = the experiment's name)
  std::vector<PartSpec> parts;  // every part, enabled or not
  // The reports, parsed and shape-checked with the experiment. A malformed one throws its
  // error (report::SpecError, or a ConfigError naming the --set that wrote it) from
  // reports(), where a consumer first needs them (a run: right after its points expand),
  // so loading a file for its name, parts or point count does not fail on its report.
  bool has_report = false;  // the file has `report:`
  const std::vector<report::ReportSpec>& reports() const;
  std::vector<report::ReportSpec> parsed_reports;  // read through reports()
  std::exception_ptr report_error;                 // the first malformed report's
  // What the tables and figures of the reports before a malformed one read.
  std::vector<ReportReader> report_readers;
  std::string resolved;  // the document as a run's config.yaml stores it (no anchors)
  SourceMap source;

  // The parts that run (with include_disabled, every part).
  std::vector<const PartSpec*> parts_to_run(bool include_disabled = false) const;
};

// Loads `file`, applies the document's `smoke:` overrides when `smoke` is set, then each
// "path=value" of `overrides` (config_overrides.hpp), and parses the result.
ExperimentSpec load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                               bool smoke);

// The same from the file's text; `file` names it in messages.
ExperimentSpec load_experiment_text(const std::string& text, const std::filesystem::path& file,
                                    const std::vector<std::string>& overrides, bool smoke);

// The loaded document with the overrides applied (--smoke, then each --set in order),
// parsed. Throws ConfigError naming the file, line and key on any malformed entry.
ExperimentSpec resolve_experiment(ExperimentDocument loaded, const std::vector<std::string>& overrides, bool smoke);
// The two halves of it: the overrides applied to `doc` (the top-level keys checked
// again, reports marked `enabled: false` left out), and the parse of the result.
ExperimentDocument& resolve_document(ExperimentDocument& doc, const std::vector<std::string>& overrides, bool smoke);
ExperimentSpec parse_experiment(const ExperimentDocument& doc);

// A run's stored config.yaml, as far as rendering its reports needs it. The run's own
// report spec is parsed only when asked: an older run renders with a newer --spec.
class StoredRunConfig {
 public:
  explicit StoredRunConfig(const std::filesystem::path& config);
  std::string experiment_name;  // "" when missing or not a name
  std::string experiment_text;  // as emitted, to tell two runs' experiments apart
  bool has_report = false;
  std::string report_text;  // as emitted, to tell two runs' report specs apart
  std::vector<report::ReportSpec> report_specs() const;

 private:
  std::string file_;
  OptionTree report_;
};

}  // namespace runner
