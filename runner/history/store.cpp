#include "history/store.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "history/sqlite.hpp"
#include "history/time_text.hpp"

namespace runner::history {
namespace fs = std::filesystem;

namespace {

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  experiment TEXT NOT NULL,
  run_dir TEXT,
  started TEXT NOT NULL,
  finished TEXT,
  verdict TEXT,
  git_commit TEXT, device TEXT, device_name TEXT, driver TEXT, cuda TEXT, libtorch TEXT,
  host TEXT, pid INTEGER, smoke INTEGER NOT NULL DEFAULT 0,
  env TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_dir ON runs(run_dir);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs(experiment, started);
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  part TEXT NOT NULL, point INTEGER NOT NULL, point_key TEXT NOT NULL,
  params TEXT NOT NULL, labels TEXT NOT NULL,
  status TEXT NOT NULL, message TEXT, time TEXT, artifacts TEXT
);
CREATE INDEX IF NOT EXISTS records_by_run ON records(run_id);
-- (run_id, status) answers the per-run counts of records and of failed ones from
-- the index alone (a store made before it gets it on first open).
CREATE INDEX IF NOT EXISTS records_by_run_status ON records(run_id, status);
CREATE TABLE IF NOT EXISTS metrics (
  record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
  name TEXT NOT NULL, unit TEXT,
  value REAL, mean REAL, std REAL, min REAL, max REAL, n INTEGER,
  samples BLOB, text TEXT
);
CREATE INDEX IF NOT EXISTS metrics_by_record ON metrics(record_id);
-- Every compare whose B side is a stored run: its baseline and outcome.
CREATE TABLE IF NOT EXISTS compares (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time TEXT NOT NULL, baseline TEXT, verdict TEXT NOT NULL, summary TEXT
);
CREATE INDEX IF NOT EXISTS compares_by_run ON compares(run_id);
-- The key of every record in one place: experiment, point, commit, device,
-- driver, CUDA, LibTorch and time.
CREATE VIEW IF NOT EXISTS record_keys AS
  SELECT r.id AS record_id, u.experiment, r.point_key, u.git_commit, u.device, u.device_name,
         u.driver, u.cuda, u.libtorch, r.time, u.id AS run_id
  FROM records r JOIN runs u ON u.id = r.run_id;
)sql";

// Text that is not UTF-8 (a plugin's label) becomes U+FFFD, not a type_error.
std::string safe_dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string env_text(const nlohmann::json& env, const char* key) {
  return env.contains(key) && env[key].is_string() ? env[key].get<std::string>() : std::string();
}

std::string device_name_of(const nlohmann::json& env) {
  const std::string gpu = env_text(env, "gpu");
  return gpu.empty() ? env_text(env, "cpu") : gpu;
}

const char* kRunColumns =
    "id, experiment, run_dir, started, finished, verdict, git_commit, device, device_name, driver, cuda, "
    "libtorch, host, pid, smoke, (SELECT count(*) FROM records r WHERE r.run_id = runs.id), "
    "(SELECT count(*) FROM records r WHERE r.run_id = runs.id AND r.status = 'error'), env";

RunInfo read_run(const Statement& s) {
  RunInfo r;
  r.id = s.int64(0);
  r.experiment = s.text(1);
  r.run_dir = s.text(2);
  r.started = s.text(3);
  r.finished = s.text(4);
  r.verdict = s.text(5);
  r.git_commit = s.text(6);
  r.device = s.text(7);
  r.device_name = s.text(8);
  r.driver = s.text(9);
  r.cuda = s.text(10);
  r.libtorch = s.text(11);
  r.host = s.text(12);
  const std::int64_t pid = s.int64(13);
  r.smoke = s.int64(14) != 0;
  r.records = s.int64(15);
  r.failed_records = s.int64(16);
  const nlohmann::json env = nlohmann::json::parse(s.text(17), nullptr, false);
  if (env.is_object()) {
    if (env.contains("overrides") && env["overrides"].is_array())
      for (const auto& o : env["overrides"])
        if (o.is_string()) r.overrides.push_back(o.get<std::string>());
    r.filter = env_text(env, "filter");
  }
  if (r.finished.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    const bool alive = r.host == host && pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    r.status = alive ? "running" : "killed";
  } else {
    r.status = r.failed_records ? "failed" : "ok";
  }
  return r;
}

}  // namespace

fs::path resolve_history_path(const std::string& flag, const std::string& config_value) {
  std::string chosen = flag;
  if (chosen.empty())
    if (const char* env = std::getenv("RUNNER_HISTORY"); env && *env) chosen = env;
  if (chosen.empty()) chosen = config_value;
  if (chosen == "off" || chosen == "none") return {};
  if (!chosen.empty()) return chosen;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return fs::path(data) / "runner" / "history.sqlite";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".local" / "share" / "runner" / "history.sqlite";
}

std::string point_key(const std::string& part, const nlohmann::json& params, const nlohmann::json& labels) {
  nlohmann::json key = nlohmann::json::object();
  key["part"] = part;
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : params.items())
    if (k != "device" && k.rfind("measure.", 0) != 0) p[k] = v;
  key["params"] = p;
  key["labels"] = labels.is_object() ? labels : nlohmann::json::object();
  return safe_dump(key);  // nlohmann objects are sorted by key: the dump is canonical
}

namespace {

std::string fnv_hex(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string point_identity(const HistoryRecord& r, bool with_device) {
  std::string text = r.experiment + "\n" + r.key;
  if (with_device) text += "\n" + r.device_name + "\n" + r.driver;
  return fnv_hex(text);
}

std::string build_identity(const HistoryRecord& r) {
  if (!r.plugins.is_object() || r.plugins.empty()) return "";
  std::string text;
  for (const auto& [name, p] : r.plugins.items())  // sorted by name: canonical
    text += name + "=" + (p.contains("sha256") && p["sha256"].is_string() ? p["sha256"].get<std::string>() : "?") + "\n";
  return fnv_hex(text);
}

nlohmann::json point_plugins(const nlohmann::json& env_plugins, const std::string& task, const nlohmann::json& params) {
  nlohmann::json out = nlohmann::json::object();
  if (!env_plugins.is_object()) return out;
  // Nested plugins (an optimizer, a profiler) appear in the flattened
  // parameters as their names; a plugin "kind/name" is the point's when its
  // name is the task or one of those values.
  std::set<std::string> names = {task};
  if (params.is_object())
    for (const auto& [k, v] : params.items())
      if (v.is_string()) names.insert(v.get<std::string>());
  for (const auto& [id, p] : env_plugins.items()) {
    const auto slash = id.find('/');
    if (names.count(slash == std::string::npos ? id : id.substr(slash + 1))) out[id] = p;
  }
  return out;
}

namespace {

// The numbers the history keeps of one metric; nullopt for text and for
// numbers the record does not hold (null).
std::optional<MetricValue> metric_value(const Metric& metric, const nlohmann::json* extra) {
  MetricValue v;
  v.unit = metric.unit;
  if (const auto* value = std::get_if<double>(&metric.value)) {
    if (std::isnan(*value)) return std::nullopt;
    v.center = v.mean = v.min = v.max = *value;
    return v;
  }
  const auto* s = std::get_if<Stats>(&metric.value);
  if (!s || std::isnan(s->median)) return std::nullopt;  // text metrics are not compared
  const auto or_center = [&](double x) { return std::isnan(x) ? s->median : x; };
  v.center = s->median;
  v.mean = or_center(s->mean);
  v.std = std::isnan(s->std) ? 0.0 : s->std;
  v.min = or_center(s->min);
  v.max = or_center(s->max);
  v.n = s->n > 0 ? s->n : 1;
  // The U test runs over the repetitions: one mean per repetition when the
  // point was measured with measure.repetitions > 1, else per-step samples.
  std::vector<double> samples = s->repetition_means;
  if (samples.size() < 2) {
    samples.clear();
    if (extra && extra->contains("samples") && (*extra)["samples"].is_array() && (*extra)["samples"].size() >= 2)
      for (const auto& x : (*extra)["samples"])
        if (x.is_number()) samples.push_back(x.get<double>());
  }
  for (double x : samples)
    if (!std::isnan(x)) v.samples.push_back(x);
  return v;
}

}  // namespace

HistoryRecord history_record(const StoredRecord& stored) {
  HistoryRecord r;
  r.experiment = stored.experiment;
  r.part = stored.part;
  r.point = static_cast<int>(stored.point.value_or(0));
  r.params = stored.params;
  r.labels = stored.labels;
  r.status = stored.status_text();
  r.message = stored.message;
  r.time = stored.time;
  r.task = stored.task;
  r.device_name = device_name_of(stored.env);
  r.driver = env_text(stored.env, "driver");
  if (stored.env.is_object() && stored.env.contains("plugins"))
    r.plugins = point_plugins(stored.env["plugins"], r.task, r.params);
  r.key = point_key(r.part, r.params, r.labels);
  for (const auto& [name, metric] : stored.metrics) {
    const auto extra = stored.metric_extra.find(name);
    if (auto v = metric_value(metric, extra == stored.metric_extra.end() ? nullptr : &extra->second))
      r.metrics.emplace(name, std::move(*v));
  }
  return r;
}

HistoryRecord parse_record(const nlohmann::json& j) { return history_record(decode_record(j)); }

std::vector<StoredRecord> read_results_file(const fs::path& results) {
  // A run killed mid-write leaves a torn point: the whole ones are the run. Types
  // are checked as `runner report` checks them, so the history never stores a
  // record (a status 5, a point "x") that the run's own tables refuse.
  std::vector<std::string> torn_point;
  return read_records(results, RecordTypes::checked, &torn_point);
}

std::vector<std::vector<StoredRecord>> whole_points(const std::vector<StoredRecord>& lines) {
  // A point interrupted and run again on --resume has an `interrupted` record
  // and a later one: the later one is the point.
  auto id = [](const StoredRecord& r) { return r.part + "\n" + (r.point ? std::to_string(*r.point) : std::string()); };
  std::set<std::string> rerun;
  for (const auto& r : lines)
    if (r.status != RecordStatus::interrupted) rerun.insert(id(r));
  std::vector<std::vector<StoredRecord>> points;
  std::map<std::string, size_t> at;
  for (const auto& r : lines) {
    const std::string key = id(r);
    if (r.status == RecordStatus::interrupted && rerun.count(key)) continue;
    const auto [it, fresh] = at.emplace(key, points.size());
    if (fresh) points.emplace_back();
    points[it->second].push_back(r);
  }
  return points;
}

std::string unwritable_reason(const fs::path& file) {
  // The file if it exists, and the nearest directory that does (the store creates the rest).
  fs::path at = fs::absolute(file);
  std::error_code ec;
  if (fs::exists(at, ec) && access(at.c_str(), W_OK) != 0) return std::strerror(errno);
  for (fs::path dir = at.parent_path();; dir = dir.parent_path()) {
    const auto kind = fs::status(dir, ec).type();
    if (kind == fs::file_type::not_found && dir != dir.parent_path()) continue;
    if (kind == fs::file_type::none) return dir.string() + ": " + ec.message();
    if (kind != fs::file_type::directory) return dir.string() + " is not a directory";
    if (access(dir.c_str(), W_OK) != 0) return dir.string() + ": " + std::strerror(errno);
    return "";
  }
}

namespace {
std::runtime_error unwritable_error(const fs::path& file, const std::string& why) {
  return std::runtime_error("history " + file.string() + ": cannot be written (" + why +
                            "); set --history, RUNNER_HISTORY or `history:` to a writable file, or off");
}
}  // namespace

void check_writable(const fs::path& file) {
  if (file.empty()) return;
  if (const std::string why = unwritable_reason(file); !why.empty()) throw unwritable_error(file, why);
}

HistoryStore::HistoryStore(const fs::path& file, HistoryAccess access) : file_(file) {
  const std::string unwritable = unwritable_reason(file);
  std::error_code ec;
  if (!unwritable.empty() && access == HistoryAccess::read && fs::is_regular_file(file, ec)) {
    read_only_ = unwritable;
    open_read_only();
    return;
  }
  if (!unwritable.empty()) throw unwritable_error(file, unwritable);
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  if (sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("history " + file.string() + ": cannot open: " + msg +
                             " (set --history, RUNNER_HISTORY or `history:` to a writable file, or off)");
  }
  // Another process may hold the write lock for a while (a long import): wait.
  sqlite3_busy_timeout(db_, 60'000);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=NORMAL");
  exec("PRAGMA foreign_keys=ON");
  // Reads (a compare loads 10,000s of rows) go through a memory map instead of
  // a copy of every page; 16 MiB of page cache for the rest.
  exec("PRAGMA mmap_size=1073741824");
  exec("PRAGMA cache_size=-16384");
  exec(kSchema);
  // Stores made before records kept their task get the column (NULL in old rows).
  bool has_task = false;
  {
    Statement s(db_, "PRAGMA table_info(records)");
    while (s.step()) has_task = has_task || s.text(1) == "task";
  }
  if (!has_task) exec("ALTER TABLE records ADD COLUMN task TEXT");
}

// A WAL database opens read-only only where SQLite can make its -shm file; on a
// read-only mount it cannot, and the file is read as immutable (nothing can change
// it there). Reads only: the schema is whatever the writer left.
void HistoryStore::open_read_only() {
  std::string uri = "file:";
  for (const char c : fs::absolute(file_).string()) {  // a URI path: %, ? and # escaped
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  for (const char* mode : {"?mode=ro", "?immutable=1"}) {
    sqlite3_close(db_);
    db_ = nullptr;
    if (sqlite3_open_v2((uri + mode).c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) == SQLITE_OK &&
        sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) == SQLITE_OK)
      break;
  }
  sqlite3_busy_timeout(db_, 60'000);
  exec("SELECT count(*) FROM runs");  // not a history: say so now, naming the file
}

HistoryStore::~HistoryStore() { sqlite3_close(db_); }

void HistoryStore::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error("history " + file_.string() + ": " + msg);
  }
}

std::int64_t HistoryStore::begin_run(const std::string& experiment, const fs::path& run_dir, const nlohmann::json& env,
                                     bool smoke, const std::string& started) {
  Transaction tx(db_);
  if (!run_dir.empty()) {
    // A new run in a directory an older run named (--out of an emptied
    // directory): that run's records left with its results.jsonl.
    Statement gone(db_, "DELETE FROM runs WHERE run_dir = ?");
    gone.bind(1, fs::absolute(run_dir).lexically_normal().string());
    gone.step();
  }
  Statement s(db_,
              "INSERT INTO runs (experiment, run_dir, started, git_commit, device, device_name, driver, cuda, "
              "libtorch, host, pid, smoke, env) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment);
  if (run_dir.empty()) s.bind_null(2);
  else s.bind(2, fs::absolute(run_dir).lexically_normal().string());
  s.bind(3, started.empty() ? utc_now() : started)
      .bind(4, env_text(env, "git_commit"))
      .bind(5, env_text(env, "device"))
      .bind(6, device_name_of(env))
      .bind(7, env_text(env, "driver"))
      .bind(8, env_text(env, "cuda_runtime"))
      .bind(9, env_text(env, "libtorch"))
      .bind(10, env_text(env, "host"))
      .bind(11, static_cast<std::int64_t>(getpid()))
      .bind(12, static_cast<std::int64_t>(smoke))
      .bind(13, safe_dump(env));
  s.step();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::int64_t HistoryStore::resume_run(const std::string& experiment, const fs::path& run_dir,
                                      const nlohmann::json& env, bool smoke,
                                      const std::vector<StoredRecord>& recorded) {
  Transaction tx(db_);
  std::int64_t id = 0;
  if (const auto known = run_by_dir(run_dir)) {
    id = known->id;
    // Running again: no longer finished nor judged; this process owns it now.
    Statement s(db_, "UPDATE runs SET finished = NULL, verdict = NULL, host = ?, pid = ? WHERE id = ?");
    s.bind(1, env_text(env, "host")).bind(2, static_cast<std::int64_t>(getpid())).bind(3, id);
    s.step();
  } else {
    const nlohmann::json& first_env = !recorded.empty() && !recorded.front().env.empty() ? recorded.front().env : env;
    id = begin_run(experiment, run_dir, first_env, smoke, recorded.empty() ? std::string() : recorded.front().time);
    Statement s(db_, "UPDATE runs SET host = ?, pid = ? WHERE id = ?");
    s.bind(1, env_text(env, "host")).bind(2, static_cast<std::int64_t>(getpid())).bind(3, id);
    s.step();
  }
  // Points the directory holds but the store does not (the history was off or
  // failed then, or the run died between its two writes).
  std::set<std::pair<std::string, std::int64_t>> stored;
  {
    Statement s(db_, "SELECT DISTINCT part, point FROM records WHERE run_id = ?");
    s.bind(1, id);
    while (s.step()) stored.emplace(s.text(0), s.int64(1));
  }
  for (const auto& point : whole_points(recorded)) {
    const StoredRecord& first = point.front();
    if (first.status == RecordStatus::interrupted) continue;  // runs again now
    if (!stored.count({first.part, first.point.value_or(0)})) add_point(id, point);
  }
  tx.commit();
  return id;
}

void HistoryStore::add_point(std::int64_t run_id, const std::vector<StoredRecord>& records) {
  Transaction tx(db_);
  if (!records.empty()) {  // a point run again (--resume after an error or timeout) replaces its earlier records
    Statement gone(db_, "DELETE FROM records WHERE run_id = ? AND part = ? AND point = ?");
    gone.bind(1, run_id).bind(2, records.front().part).bind(3, records.front().point.value_or(0));
    gone.step();
  }
  Statement rec(db_,
                "INSERT INTO records (run_id, part, point, point_key, params, labels, status, message, time, "
                "artifacts, task) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  Statement met(db_,
                "INSERT INTO metrics (record_id, name, unit, value, mean, std, min, max, n, samples, text) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  for (const StoredRecord& stored : records) {
    const HistoryRecord r = history_record(stored);
    rec.reset();
    rec.bind(1, run_id).bind(2, r.part).bind(3, static_cast<std::int64_t>(r.point)).bind(4, r.key)
        .bind(5, safe_dump(r.params)).bind(6, safe_dump(r.labels)).bind(7, r.status).bind(8, r.message).bind(9, r.time)
        .bind(10, safe_dump(stored.artifacts)).bind(11, r.task);
    rec.step();
    const std::int64_t record_id = sqlite3_last_insert_rowid(db_);
    for (const auto& [name, v] : r.metrics) {
      met.reset();
      met.bind(1, record_id).bind(2, name).bind(3, v.unit).bind(4, v.center).bind(5, v.mean).bind(6, v.std)
          .bind(7, v.min).bind(8, v.max).bind(9, v.n).bind_blob(10, v.samples).bind_null(11);
      met.step();
    }
    for (const auto& [name, m] : stored.metrics)
      if (const auto* text = std::get_if<std::string>(&m.value)) {
        met.reset();
        met.bind(1, record_id).bind(2, name).bind(3, std::string()).bind(11, safe_dump(*text));
        met.step();
      }
  }
  tx.commit();
}

void HistoryStore::finish_run(std::int64_t run_id, const std::string& finished) {
  Statement s(db_, "UPDATE runs SET finished = ? WHERE id = ?");
  s.bind(1, finished.empty() ? utc_now() : finished).bind(2, run_id);
  s.step();
}

void HistoryStore::set_verdict(std::int64_t run_id, const std::string& verdict) {
  Statement s(db_, "UPDATE runs SET verdict = ? WHERE id = ?");
  s.bind(1, verdict).bind(2, run_id);
  s.step();
}

void HistoryStore::record_compare(std::int64_t run_id, const std::string& baseline, bool regression,
                                  const std::string& summary) {
  Transaction tx(db_);
  const std::string verdict = regression ? "regression" : "ok";
  {
    Statement s(db_, "INSERT INTO compares (run_id, time, baseline, verdict, summary) VALUES (?,?,?,?,?)");
    s.bind(1, run_id).bind(2, utc_now()).bind(3, baseline).bind(4, verdict).bind(5, summary);
    s.step();
  }
  Statement s(db_, regression ? "UPDATE runs SET verdict = 'regression' WHERE id = ?"
                              : "UPDATE runs SET verdict = 'ok' WHERE id = ? AND coalesce(verdict, '') = ''");
  s.bind(1, run_id);
  s.step();
  tx.commit();
}

std::vector<CompareLog> HistoryStore::compares(std::int64_t run_id) const {
  Statement s(db_, "SELECT run_id, time, baseline, verdict, summary FROM compares WHERE run_id = ? ORDER BY id");
  s.bind(1, run_id);
  std::vector<CompareLog> out;
  while (s.step()) out.push_back({s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4)});
  return out;
}

std::vector<RunInfo> HistoryStore::runs(const RunFilter& f) const {
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE 1";
  if (!f.experiment.empty()) sql += " AND experiment = ?1";
  if (!f.device_name.empty()) sql += " AND device_name = ?2";
  if (!f.since.empty()) sql += " AND started >= ?3";
  if (!f.commit_prefix.empty()) sql += " AND substr(git_commit, 1, length(?4)) = ?4";
  if (f.smoke) sql += " AND smoke = ?5";
  if (f.finished_only || f.good_only) sql += " AND finished IS NOT NULL";
  if (f.good_only)
    sql += " AND coalesce(verdict, '') <> 'regression' AND NOT EXISTS (SELECT 1 FROM records r WHERE "
           "r.run_id = runs.id AND r.status = 'error')";
  if (f.exclude_run) sql += " AND id <> ?6";
  if (!f.started_before.empty()) sql += " AND started <= ?7";
  sql += " ORDER BY started DESC, id DESC";
  if (f.limit > 0) sql += " LIMIT " + std::to_string(f.limit);
  Statement s(db_, sql.c_str());
  if (!f.experiment.empty()) s.bind(1, f.experiment);
  if (!f.device_name.empty()) s.bind(2, f.device_name);
  if (!f.since.empty()) s.bind(3, f.since);
  if (!f.commit_prefix.empty()) s.bind(4, f.commit_prefix);
  if (f.smoke) s.bind(5, static_cast<std::int64_t>(*f.smoke));
  if (f.exclude_run) s.bind(6, f.exclude_run);
  if (!f.started_before.empty()) s.bind(7, f.started_before);
  std::vector<RunInfo> out;
  while (s.step()) out.push_back(read_run(s));
  return out;
}

std::vector<std::string> HistoryStore::experiments() const {
  Statement s(db_, "SELECT DISTINCT experiment FROM runs ORDER BY experiment");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::optional<RunInfo> HistoryStore::run(std::int64_t id) const {
  Statement s(db_, (std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?").c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::optional<RunInfo> HistoryStore::run_by_dir(const fs::path& run_dir) const {
  Statement s(db_, (std::string("SELECT ") + kRunColumns + " FROM runs WHERE run_dir = ?").c_str());
  s.bind(1, fs::absolute(run_dir).lexically_normal().string());
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::vector<HistoryRecord> HistoryStore::records(std::int64_t run_id) const {
  std::vector<HistoryRecord> out;
  std::string experiment, device_name, driver;
  nlohmann::json env_plugins;
  {
    Statement e(db_, "SELECT experiment, device_name, driver, env FROM runs WHERE id = ?");
    e.bind(1, run_id);
    if (e.step()) {
      experiment = e.text(0);
      device_name = e.text(1);
      driver = e.text(2);
      const nlohmann::json env = nlohmann::json::parse(e.text(3), nullptr, false);
      if (env.is_object() && env.contains("plugins")) env_plugins = env["plugins"];
    }
  }
  // Rows come in index order (status, id); they are put back in id order below,
  // which is cheaper than SQLite's sort of whole rows.
  Statement s(db_, "SELECT id, part, point, point_key, params, labels, status, message, time, task FROM records "
                   "WHERE run_id = ?");
  s.bind(1, run_id);
  std::vector<std::pair<std::int64_t, size_t>> ids;  // record id, position in out
  while (s.step()) {
    HistoryRecord r;
    r.run_id = run_id;
    r.experiment = experiment;
    r.part = s.text(1);
    r.point = static_cast<int>(s.int64(2));
    r.key = s.text(3);
    r.params = nlohmann::json::parse(s.text(4));
    const std::string labels = s.text(5);
    r.labels = labels == "{}" ? nlohmann::json::object() : nlohmann::json::parse(labels);
    r.status = s.text(6);
    r.message = s.text(7);
    r.time = s.text(8);
    r.task = s.text(9);
    r.device_name = device_name;
    r.driver = driver;
    if (!env_plugins.is_null()) r.plugins = point_plugins(env_plugins, r.task, r.params);
    ids.emplace_back(s.int64(0), out.size());
    out.push_back(std::move(r));
  }
  if (out.empty()) return out;
  std::sort(ids.begin(), ids.end());
  {
    std::vector<HistoryRecord> sorted;
    sorted.reserve(out.size());
    for (auto& [id, pos] : ids) {
      sorted.push_back(std::move(out[pos]));
      pos = sorted.size() - 1;
    }
    out = std::move(sorted);
  }
  // The metrics of a run's records lie in one range of record ids (a record of
  // another run written meanwhile may sit inside it: skipped).
  Statement m(db_, "SELECT record_id, name, unit, value, mean, std, min, max, n, samples FROM metrics "
                   "WHERE record_id BETWEEN ? AND ? AND text IS NULL");
  m.bind(1, ids.front().first).bind(2, ids.back().first);
  auto at = ids.begin();
  while (m.step()) {
    const std::int64_t record_id = m.int64(0);
    if (at == ids.end() || at->first != record_id) {
      at = std::lower_bound(ids.begin(), ids.end(), std::make_pair(record_id, size_t{0}));
      if (at == ids.end() || at->first != record_id) continue;
    }
    MetricValue v;
    v.unit = m.text(2);
    v.center = m.real(3);
    v.mean = m.real(4);
    v.std = m.real(5);
    v.min = m.real(6);
    v.max = m.real(7);
    v.n = m.int64(8);
    v.samples = m.blob_doubles(9);
    out[at->second].metrics.emplace(m.text(1), std::move(v));
  }
  return out;
}

std::int64_t HistoryStore::import_run_dir(const fs::path& run_dir) {
  const fs::path results = run_dir / "results.jsonl";
  if (!fs::exists(results))
    throw std::runtime_error(run_dir.string() + ": not a run directory (no results.jsonl)");
  const std::vector<StoredRecord> lines = read_results_file(results);
  if (lines.empty()) throw std::runtime_error(results.string() + ": no records to import");
  bool smoke = false;
  {
    std::ifstream config(run_dir / "config.yaml");
    std::string first;
    std::getline(config, first);
    smoke = first.find("with --smoke") != std::string::npos;
  }
  const StoredRecord& first = lines.front();
  const std::string started = first.time.empty() ? utc_now() : first.time;
  // One transaction, the check inside it: parallel imports of one directory add
  // it once, and a killed import adds nothing.
  Transaction tx(db_);
  if (const auto known = run_by_dir(run_dir)) {
    // Held only in part (the history was locked mid-run, or the run died between its
    // two writes): the points the store lacks are added and the run is finished.
    std::set<std::pair<std::string, std::int64_t>> stored;
    {
      Statement s(db_, "SELECT DISTINCT part, point FROM records WHERE run_id = ?");
      s.bind(1, known->id);
      while (s.step()) stored.emplace(s.text(0), s.int64(1));
    }
    std::size_t added = 0;
    for (const auto& point : whole_points(lines)) {
      const StoredRecord& head = point.front();
      if (head.status == RecordStatus::interrupted || stored.count({head.part, head.point.value_or(0)})) continue;
      add_point(known->id, point);
      ++added;
    }
    if (added == 0) return 0;
    if (known->finished.empty()) finish_run(known->id, lines.back().time.empty() ? utc_now() : lines.back().time);
    tx.commit();
    return known->id;
  }
  const std::int64_t id =
      begin_run(first.experiment.empty() ? run_dir.filename().string() : first.experiment, run_dir, first.env, smoke,
                started);
  for (const auto& point : whole_points(lines)) add_point(id, point);
  finish_run(id, lines.back().time.empty() ? started : lines.back().time);
  tx.commit();
  return id;
}

}  // namespace runner::history
