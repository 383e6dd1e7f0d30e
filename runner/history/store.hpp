// The run history: every run's records in one SQLite database, so runs can be
// listed, compared and plotted over commits. Runs carry the environment (commit,
// device, driver, CUDA, LibTorch, host, time); records carry the point (part,
// parameters, labels), status and metrics with their repetitions (per-repetition means, else per-step samples).
// Concurrency: WAL journal plus a busy timeout, and each point's records are one
// IMMEDIATE transaction, so two runs can write at once and a killed run leaves
// only whole points (its run stays without `finished`).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/stored_record.hpp"

struct sqlite3;

namespace runner::history {

struct RunInfo {
  std::int64_t id = 0;
  std::string experiment, run_dir, started, finished;  // times: UTC ISO 8601; finished empty if not
  std::string status;   // running, ok, failed (a point errored), killed (unfinished, process gone)
  std::string verdict;  // "" (never compared), ok, regression (set by scheduled compares)
  std::string git_commit, device, device_name, driver, cuda, libtorch, host;
  bool smoke = false;
  std::int64_t records = 0, failed_records = 0;
  // How the run was asked for: its --set overrides and --filter (the env's
  // "overrides" and "filter"; empty for runs recorded before they were kept).
  std::vector<std::string> overrides;
  std::string filter;
};

struct MetricValue {
  std::string unit;
  double center = 0;  // median of a Stats metric, else the value
  double mean = 0, std = 0, min = 0, max = 0;
  std::int64_t n = 1;
  std::vector<double> samples;  // per-step or per-repetition values when the record has them
  std::int64_t rounds = 0;      // > 0: merge_rounds made it, and samples are the medians of this many rounds
  // merge_rounds: each round's best step (its fastest: min; max for a rate), what
  // compare tests rounds on; empty when the rounds recorded no extremes.
  std::vector<double> round_best;
};

struct HistoryRecord {
  std::int64_t run_id = 0;
  std::string experiment, part, key;  // key: canonical JSON of part, params and labels (see point_key)
  int point = 0;
  nlohmann::json params, labels;
  std::string status, message, time;
  std::string task, device_name, driver;  // device model (GPU or CPU name) and driver of its run
  // The plugin .so files the point loaded: {"task/echo": {"sha256": ..., "commit": ...}}.
  nlohmann::json plugins = nlohmann::json::object();
  std::map<std::string, MetricValue> metrics;  // numeric metrics only
};

struct RunFilter {
  std::string experiment, device_name, since, commit_prefix;  // empty: any
  std::optional<bool> smoke;
  bool finished_only = false, good_only = false;
  std::string started_before;  // non-empty: only runs started at or before this time
  std::int64_t exclude_run = 0;
  int limit = 0;  // 0: all
};

// Where the history lives: --history, else RUNNER_HISTORY, else the experiment's
// `history:` key, else $XDG_DATA_HOME/runner/history.sqlite (~/.local/share/...).
// "off" (or "none") disables it.
std::filesystem::path resolve_history_path(const std::string& flag, const std::string& config_value);

// The identity of a point across runs: part, parameters and labels; the device
// and measure.* settings are left out (runs on two devices or with more steps
// still describe the same point).
std::string point_key(const std::string& part, const nlohmann::json& params, const nlohmann::json& labels);

// A point's identity across runs: a hash (16 hex digits) of the experiment, the
// point key (part, parameters after overrides, labels) and, unless
// `with_device` is false (--cross-device), the device model and driver.
// last-good, compares and trends match points on it.
std::string point_identity(const HistoryRecord& r, bool with_device = true);
// The code a point ran: a hash of the content of every plugin .so it loaded
// ("" when the record predates plugin hashes). Two runs of one identity with
// different builds are what a compare judges; a build change is named in it.
std::string build_identity(const HistoryRecord& r);
// The plugins of a run's environment ("plugins") that a point of `task` with
// these parameters loaded: its task and the nested plugins its parameters name.
nlohmann::json point_plugins(const nlohmann::json& env_plugins, const std::string& task, const nlohmann::json& params);

// One compare as the history keeps it (every compare whose B side is a stored run).
struct CompareLog {
  std::int64_t run_id = 0;
  std::string time, baseline, verdict, summary;
};

// Why `file` cannot be written by this process ("" when it can): a read-only file
// system, no permission, or a parent that is not a directory. SQLite's WAL needs the
// directory as well as the file (it creates <file>-wal and <file>-shm beside it).
std::string unwritable_reason(const std::filesystem::path& file);
// Throws std::runtime_error naming `file`, why it cannot be written and the fix; nothing
// when it can, or when `file` is empty (the history is off).
void check_writable(const std::filesystem::path& file);

// write: the store must take writes (a run, --import, --mark-good); an unwritable
// file is an error naming it and the fix. read: listing and comparing; a file that
// cannot be written (a read-only mount) is opened read-only, and read_only() says so.
enum class HistoryAccess { write, read };

// A parameter value renamed in one experiment's stored points (a script moved:
// `script` bench/ -> pytorch/): `from` names one string value, or a folder when it
// ends in '/' (every value under it moves, `to` must end in '/' too). The points
// it rewrites keep their history: their params and point key read as if they
// had always had the new value.
struct Rekey {
  std::string experiment, param, from, to;
  // Joining a point the history already holds under the new value (runs made after
  // the rename, before the rekey) is allowed only when asked: the same values can
  // name two different points.
  bool merge = false;
};
struct RekeyCount {
  std::int64_t records = 0, points = 0, runs = 0;
};

class HistoryStore {
 public:
  explicit HistoryStore(const std::filesystem::path& file, HistoryAccess access = HistoryAccess::write);
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  const std::filesystem::path& file() const { return file_; }
  // Why the store was opened read-only ("" when it takes writes).
  const std::string& read_only() const { return read_only_; }

  // A new run from the environment JSON of its records (capture_environment).
  std::int64_t begin_run(const std::string& experiment, const std::filesystem::path& run_dir,
                         const nlohmann::json& env, bool smoke, const std::string& started = "");
  // All records of one point (results.jsonl lines) in one transaction.
  void add_point(std::int64_t run_id, const std::vector<StoredRecord>& records);
  void finish_run(std::int64_t run_id, const std::string& finished = "");
  void set_verdict(std::int64_t run_id, const std::string& verdict);
  // Keeps a compare's outcome and sets the run's verdict: "regression" always
  // (so the run is never last-good), "ok" only where no compare judged it yet
  // (a later lenient compare does not clear a regression; --mark-good does).
  void record_compare(std::int64_t run_id, const std::string& baseline, bool regression, const std::string& summary);
  std::vector<CompareLog> compares(std::int64_t run_id) const;

  std::vector<RunInfo> runs(const RunFilter& filter) const;
  std::vector<std::string> experiments() const;
  std::optional<RunInfo> run(std::int64_t id) const;
  std::optional<RunInfo> run_by_dir(const std::filesystem::path& run_dir) const;
  std::vector<HistoryRecord> records(std::int64_t run_id) const;

  // A resumed run (--resume): the run of that directory again (a new one when the
  // store lacks it), unfinished, owned by this process, with every point of
  // `recorded` (the directory's results.jsonl lines so far) that it lacks.
  std::int64_t resume_run(const std::string& experiment, const std::filesystem::path& run_dir,
                          const nlohmann::json& env, bool smoke, const std::vector<StoredRecord>& recorded);

  // Imports a finished run directory (config.yaml + results.jsonl); returns the
  // run id, or 0 when that directory is already in the store whole. A run the store
  // holds in part gets the points it lacks and is marked finished (its id returned).
  std::int64_t import_run_dir(const std::filesystem::path& run_dir);

  // Rewrites the params and point key of every record of `r.experiment` whose `r.param`
  // the rename matches, in one transaction (with `dry_run`, counts and writes nothing).
  // Throws, writing nothing, on an invalid rename or when it would merge two different
  // points: into a point stored under the new value (unless `r.merge`), or two points of
  // one run (always).
  RekeyCount rekey(const Rekey& r, bool dry_run = false);

 private:
  void exec(const char* sql) const;
  void open_read_only();
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
  std::string read_only_;
};

// A record as the history keeps it (numeric metrics only; shared by the store and
// compare of run dirs); parse_record reads one results.jsonl line leniently (fields
// of the wrong JSON type read as text or defaults, never a type error).
HistoryRecord history_record(const StoredRecord& record);
HistoryRecord parse_record(const nlohmann::json& line);

// Every record of a results.jsonl's whole points, each field's JSON type checked as
// the report checks it (a torn point is dropped); errors name the file and line.
std::vector<StoredRecord> read_results_file(const std::filesystem::path& results);

// Records grouped by point (part, index) in first-seen order; an `interrupted`
// record of a point that has another record is left out.
std::vector<std::vector<StoredRecord>> whole_points(const std::vector<StoredRecord>& lines);

}  // namespace runner::history
