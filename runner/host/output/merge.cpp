#include "output/merge.hpp"

#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/stderr_line.hpp"
#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "config/shard.hpp"
#include "config/sweep.hpp"
#include "output/run_dir.hpp"
#include "output/run_reports.hpp"
#include "report/report.hpp"
#include "runner/stored_record.hpp"

namespace runner {
namespace fs = std::filesystem;
namespace {

const char* kMergeHelp =
    "usage: runner merge <shard-dir>... --out DIR [--reports DIR] [--allow-dirty] [--plugin-path DIR]...\n"
    "Joins the run directories of `runner x.yaml --shard I/N` (I = 0..N-1, each given once) into one new\n"
    "run directory DIR: the records of every point in sweep order, as one unsharded run writes them, the\n"
    "points' artifacts, each shard's log (log.shard-I.txt) and the reports. Refuses (exit 2) shards of\n"
    "different resolved configs or commits, a shard given twice or missing, and a shard without a record\n"
    "for one of its points (finish it first with `runner x.yaml --shard I/N --resume <shard-dir>`).\n"
    "--reports into the project's reports (the folder with renders.txt) takes records of a clean commit only;\n"
    "--allow-dirty accepts uncommitted changes or an unknown commit, and every caption then says so.\n";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One point's records as the shard wrote them (whole lines, unchanged).
struct PointLines {
  std::string part;
  int index = 0;
  std::string status;  // of its first record
  std::string text;
};

// The whole points of a results.jsonl in file order; a point cut off while being
// written is left out (as every reader does).
std::vector<PointLines> whole_points(const fs::path& results) {
  std::vector<PointLines> points;
  std::ifstream in(results);
  PointLines current;
  long expected = 0, seen = 0;
  std::size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = parse_record_line(line);
    } catch (const std::exception& e) {
      if (in.peek() == EOF) break;  // a last line cut off by a kill
      throw ConfigError(results.string() + ":" + std::to_string(line_number) + ": " + e.what() +
                        "; the shard's records are damaged, run that shard again");
    }
    const auto marker = record.value("point_record", nlohmann::json());
    const long i = marker.is_array() && marker.size() == 2 ? marker[0].get<long>() : 1;
    const long n = marker.is_array() && marker.size() == 2 ? marker[1].get<long>() : 1;
    if (i == 1) {
      current = PointLines{record.value("part", ""), record.value("point", 0), record.value("status", ""), ""};
      expected = n;
      seen = 0;
    } else if (i != seen + 1 || n != expected) {
      seen = -1;  // torn: skip until the next point starts
      continue;
    }
    if (seen < 0) continue;
    current.text += line + "\n";
    if (++seen == expected) points.push_back(current);
  }
  return points;
}

struct ShardRun {
  fs::path dir;
  Shard shard;
  std::string first_line;  // "# resolved from ..."
  std::string document;
  std::set<std::string> commits;
  std::map<std::pair<std::string, int>, PointLines> points;  // the last whole records of each point
};

ShardRun read_shard(const fs::path& dir) {
  ShardRun run;
  run.dir = dir;
  if (!fs::is_regular_file(dir / "config.yaml"))
    throw ConfigError("runner merge: " + dir.string() + ": not a run directory (no config.yaml)");
  const auto shard = shard_of_run(dir);
  if (!shard)
    throw ConfigError("runner merge: " + dir.string() + ": not a shard (its config.yaml names no shard); merge joins "
                      "the runs of `runner x.yaml --shard I/N`");
  run.shard = *shard;
  const std::string config = read_text(dir / "config.yaml");
  run.first_line = config.substr(0, config.find('\n'));
  run.document = stored_document(config);
  if (fs::exists(dir / "results.jsonl"))
    for (PointLines& p : whole_points(dir / "results.jsonl")) {
      std::istringstream lines(p.text);
      for (std::string line; std::getline(lines, line);) {
        const auto env = nlohmann::json::parse(line).value("env", nlohmann::json::object());
        if (env.contains("git_commit") && env["git_commit"].is_string()) run.commits.insert(env["git_commit"]);
      }
      // A point run again (--resume after an interruption or error) supersedes its earlier records.
      run.points[{p.part, p.index}] = std::move(p);
    }
  return run;
}

// The experiment file named by config.yaml's first line ("# resolved from FILE[ with --smoke]").
std::string experiment_of(const std::string& first_line) {
  const std::string prefix = "# resolved from ", smoke = " with --smoke";
  if (first_line.rfind(prefix, 0) != 0) return "<experiment>";
  std::string file = first_line.substr(prefix.size());
  if (config_header_marks_smoke(first_line)) file.resize(file.size() - smoke.size());
  return file;
}

std::string joined(const std::set<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Same resolved config and --smoke, same commits, each shard of one N exactly once.
void check_shards(const std::vector<ShardRun>& runs) {
  const ShardRun& first = runs.front();
  const std::string smoke_of_first = config_header_marks_smoke(first.first_line) ? "with" : "without";
  std::map<int, fs::path> seen;
  for (const ShardRun& r : runs) {
    if (r.document != first.document)
      throw ConfigError("runner merge: " + r.dir.string() + ": its resolved config differs from " +
                        first.dir.string() + "'s; only shards of one sweep (same experiment, --set and --smoke) merge");
    if (config_header_marks_smoke(r.first_line) != config_header_marks_smoke(first.first_line))
      throw ConfigError("runner merge: " + r.dir.string() + ": ran " +
                        (smoke_of_first == "with" ? "without" : "with") + " --smoke, " + first.dir.string() + " " +
                        smoke_of_first + "; only shards of one sweep merge");
    if (r.shard.count != first.shard.count)
      throw ConfigError("runner merge: " + r.dir.string() + " is shard " + r.shard.text() + ", " + first.dir.string() +
                        " shard " + first.shard.text() + "; merge the shards of one split");
    if (!r.commits.empty() && !first.commits.empty() && r.commits != first.commits)
      throw ConfigError("runner merge: " + r.dir.string() + " ran at commit " + joined(r.commits) + ", " +
                        first.dir.string() + " at " + joined(first.commits) +
                        "; shards of one sweep must run the same code (run the odd shard again)");
    if (const auto [at, fresh] = seen.emplace(r.shard.index, r.dir); !fresh)
      throw ConfigError("runner merge: " + r.dir.string() + " and " + at->second.string() + " are both shard " +
                        r.shard.text() + " (overlapping shards); give each shard once");
  }
  std::string missing;
  for (int i = 0; i < first.shard.count; ++i)
    if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (!missing.empty())
    throw ConfigError("runner merge: shard(s) " + missing + " of " + std::to_string(first.shard.count) +
                      " missing; give every shard's run directory");
}

void copy_tree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return;
  fs::create_directories(to.parent_path());
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::skip_existing, ec);
  if (ec) throw ConfigError("runner merge: cannot copy " + from.string() + " to " + to.string() + " (" + ec.message() + ")");
}

}  // namespace

void merge_shards(const std::vector<fs::path>& shards, const fs::path& out, const fs::path& reports_dir,
                  const PluginRegistry& registry, std::ostream& log, bool allow_dirty) {
  if (shards.empty()) throw ConfigError("runner merge: expected the shards' run directories (runner merge --help)");
  if (out.empty()) throw ConfigError("runner merge: --out DIR is required: the new run directory of the merged sweep");
  std::vector<ShardRun> runs;
  for (const fs::path& dir : shards) runs.push_back(read_shard(dir));
  check_shards(runs);
  std::map<int, const ShardRun*> by_index;
  for (const ShardRun& r : runs) by_index[r.shard.index] = &r;

  // The sweep order, from the shared config (what an unsharded run would run).
  const fs::path first_config = runs.front().dir / "config.yaml";
  const ExperimentSpec exp = load_experiment(first_config, {}, false);
  const std::vector<Point> points = expand_points(exp, registry, kMaxPointsCeiling);
  const int n = runs.front().shard.count;
  std::string merged_text;
  for (std::size_t p = 0; p < points.size(); ++p) {
    const ShardRun& owner = *by_index.at(static_cast<int>(p % static_cast<std::size_t>(n)));
    const auto found = owner.points.find({points[p].part, points[p].index});
    if (found == owner.points.end() || found->second.status == "interrupted")
      throw ConfigError("runner merge: " + owner.dir.string() + " (shard " + owner.shard.text() + ") has no finished "
                        "record of " + points[p].part + "[" + std::to_string(points[p].index) + "] " +
                        describe_point(points[p]) + "; finish it with `runner " + experiment_of(owner.first_line) +
                        " --shard " + owner.shard.text() + " --resume " + owner.dir.string() +
                        (config_header_marks_smoke(owner.first_line) ? " --smoke" : "") +
                        "` (with the shard's --set and --device), then merge");
    merged_text += found->second.text;
  }
  // Unclean records are refused for the project's reports before the merged run is written,
  // as `runner report` refuses them (same rule, same --allow-dirty).
  const report::RunSummary summary{config_header_marks_smoke(runs.front().first_line), points.size(), allow_dirty};
  if (!reports_dir.empty()) {
    std::vector<StoredRecord> records;
    for (const ShardRun& r : runs) {
      if (!fs::exists(r.dir / "results.jsonl")) continue;
      auto some = report::read_results(r.dir / "results.jsonl");
      records.insert(records.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
    }
    std::string from;
    for (const ShardRun& r : runs) from += (from.empty() ? "" : ", ") + (r.dir / "results.jsonl").string();
    refuse_unclean(records, reports_dir, summary, "runner merge: " + from);
  }

  std::error_code ec;
  if (fs::exists(out, ec) && (!fs::is_directory(out, ec) || !fs::is_empty(out, ec)))
    throw ConfigError("--out " + out.string() + ": exists and is not empty; the merged run needs a new (or empty) "
                      "directory");
  fs::create_directories(out / "artifacts", ec);
  if (ec) throw ConfigError("--out " + out.string() + ": cannot create the run directory (" + ec.message() + ")");
  const auto lock = lock_run_directory(out, "--out");
  {
    std::ofstream config(out / "config.yaml");
    config << runs.front().first_line << "\n# merged by runner merge from " << n << " shards:";
    for (const auto& [i, r] : by_index) config << " " << r->dir.string();
    config << "\n" << runs.front().document << "\n";
    std::ofstream results(out / "results.jsonl", std::ios::binary);
    results << merged_text;
    if (!config || !results) throw ConfigError("--out " + out.string() + ": cannot write the merged run (disk full?)");
  }
  for (const auto& [i, r] : by_index) {
    copy_tree(r->dir / "artifacts", out / "artifacts");
    copy_tree(r->dir / "log.txt", out / ("log.shard-" + std::to_string(i) + ".txt"));
  }
  log << "merged " << n << " shards (" << points.size() << " points) into " << out.string() << "\n";
  std::vector<fs::path> reports_dirs = {out / "reports"};
  if (!reports_dir.empty()) reports_dirs.push_back(reports_dir);
  write_run_reports(exp.reports(), first_config.string(), out / "results.jsonl", reports_dirs, summary);
}

int merge_verb(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    std::vector<fs::path> shards, extra;
    fs::path out, reports;
    bool allow_dirty = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw ConfigError("runner merge: " + a + " needs a value (runner merge --help)");
        return args[++i];
      };
      if (a == "--help" || a == "-h") {
        std::cout << kMergeHelp;
        return 0;
      } else if (a == "--out" || a == "-o") {
        out = value();
      } else if (a == "--reports") {
        reports = value();
      } else if (a == "--allow-dirty") {
        allow_dirty = true;
      } else if (a == "--plugin-path") {
        extra.emplace_back(value());
      } else if (a.rfind("-", 0) == 0) {
        throw ConfigError("runner merge: unknown option " + a + " (runner merge --help)");
      } else {
        shards.emplace_back(a);
      }
    }
    PluginRegistry registry;
    registry.scan(PluginRegistry::search_path(extra));
    merge_shards(shards, out, reports, registry, std::cerr, allow_dirty);
    return 0;
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    write_stderr_line(what.rfind("runner ", 0) == 0 ? what : "runner: " + what);
    return 2;
  } catch (const report::SpecError& e) {
    write_stderr_line(std::string("runner: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    write_stderr_line(std::string("runner merge: ") + e.what());
    return 1;
  }
}

}  // namespace runner
