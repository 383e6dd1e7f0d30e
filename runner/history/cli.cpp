#include "history/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include <boost/program_options.hpp>

#include "history/command_line.hpp"
#include "history/compare.hpp"
#include "history/store.hpp"
#include "history/time_text.hpp"
#include "history/trends.hpp"
#include "runner/printable.hpp"

namespace runner::history {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

std::string opt(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? vm[name].as<std::string>() : std::string();
}

// "a,b" and repeated flags alike.
std::vector<std::string> comma_list(const po::variables_map& vm, const char* name) {
  std::vector<std::string> out;
  if (!vm.count(name)) return out;
  for (const auto& value : vm[name].as<std::vector<std::string>>()) {
    std::stringstream in(value);
    for (std::string item; std::getline(in, item, ',');)
      if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "--set a=1 --set b=2 --filter X" of a run, or "-" when it had none.
std::string asked_text(const RunInfo& r) {
  std::string s;
  for (const auto& o : r.overrides) s += (s.empty() ? "" : " ") + std::string("--set ") + o;
  if (!r.filter.empty()) s += (s.empty() ? "" : " ") + std::string("--filter ") + r.filter;
  return s.empty() ? "-" : s;
}

std::vector<fs::path> run_dirs_under(const fs::path& root) {
  std::vector<fs::path> dirs;
  if (fs::exists(root / "results.jsonl")) return {root};
  if (!fs::is_directory(root)) throw std::runtime_error(root.string() + ": no such directory");
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().filename() == "results.jsonl") dirs.push_back(e.path().parent_path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// runner history --rekey PARAM: one line of counts, or one line of why not (exit 2).
int rekey_command(const po::variables_map& vm, HistoryStore& store) {
  Rekey r{opt(vm, "experiment"), opt(vm, "rekey"), opt(vm, "from"), opt(vm, "to"), vm.count("merge") > 0};
  if (r.experiment.empty() || !vm.count("from") || !vm.count("to")) {
    std::cerr << "runner history --rekey " << r.param
              << ": give --experiment X, --from OLD and --to NEW (e.g. --rekey script --from bench/ --to pytorch/)\n";
    return 2;
  }
  const bool dry = vm.count("dry-run") > 0;
  try {
    const RekeyCount n = store.rekey(r, dry);
    std::cout << (dry ? "would rekey " : "rekeyed ") << n.records << " record(s) (" << n.points << " point(s) in "
              << n.runs << " run(s)) of experiment " << printable(r.experiment) << ": " << printable(r.param) << " "
              << printable(r.from) << " -> " << printable(r.to) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "runner history --rekey " << printable(r.param) << ": " << printable(e.what()) << "\n";
    return 2;
  }
}

const char* kHistoryUsage =
    "usage: runner history [--experiment X] [--since 7d|2026-11-01] [--device NAME] [--limit N]\n"
    "       runner history --import DIR...   add run directories (or directories of runs) to the history\n"
    "       runner history --html DIR        write a static trends site (one page per experiment)\n"
    "       runner history --mark-good ID    accept a run flagged as a regression as the new baseline\n"
    "       runner history --rekey PARAM --experiment X --from OLD --to NEW [--dry-run] [--merge]\n"
    "                                        rename a parameter's value in the stored points (a moved script:\n"
    "                                        --rekey script --from bench/ --to pytorch/; a value ending in /\n"
    "                                        is a folder), so their history goes on under the new name\n";

}  // namespace

int history_command(const std::vector<std::string>& args) {
  po::options_description flags("history options");
  flags.add_options()("help,h", "show this help")
      ("history", po::value<std::string>(), "history database (default: RUNNER_HISTORY, else ~/.local/share/runner/history.sqlite)")
      ("experiment,e", po::value<std::string>(), "only this experiment")
      ("since", po::value<std::string>(), "only runs started since a date or age (7d, 36h)")
      ("device", po::value<std::string>(), "only runs on this device (as listed)")
      ("limit", po::value<int>()->default_value(50), "at most this many runs (0: all)")
      ("import", "import the run directories given as arguments")
      ("html", po::value<std::string>(), "write the trends site into this directory")
      ("mark-good", po::value<std::int64_t>(), "clear the regression verdict of this run")
      ("rekey", po::value<std::string>(), "rename a value of this parameter in the stored points of --experiment")
      ("from", po::value<std::string>(), "--rekey: the old value (ending in /: a folder, every value under it)")
      ("to", po::value<std::string>(), "--rekey: the new value")
      ("dry-run", "--rekey: count the records it would change, change nothing")
      ("merge", "--rekey: allow joining a point already stored under the new value (runs made after the rename)")
      ("json", "list runs as JSON lines");
  ParsedCommandLine p;
  int code = 0;
  if (!parse_command_line(args, flags, "", kHistoryUsage, p, code)) return code;
  const fs::path file = resolve_history_path(opt(p.vm, "history"), "");
  if (file.empty()) {
    std::cerr << "runner history: the history is off (RUNNER_HISTORY=off); set --history FILE\n";
    return 2;
  }
  if (!p.vm.count("import") && !p.positional.empty()) {
    std::cerr << "runner history: unexpected argument '" << p.positional[0] << "' (did you mean --import?)\n";
    return 2;
  }
  if (!p.vm.count("import") && !fs::exists(file)) {
    std::cerr << "runner history: no history at " << file.string()
              << " yet (runs add themselves; `runner history --import runs/` adds old ones)\n";
    return 2;
  }
  // Listing and the trends site only read: a history on a read-only mount serves them.
  const bool writes = p.vm.count("import") || p.vm.count("mark-good") || p.vm.count("rekey");
  HistoryStore store(file, writes ? HistoryAccess::write : HistoryAccess::read);
  if (p.vm.count("rekey")) return rekey_command(p.vm, store);
  if (p.vm.count("import")) {
    if (p.positional.empty()) {
      std::cerr << "runner history --import: give run directories (or a directory of runs, e.g. runs/)\n";
      return 2;
    }
    int added = 0, known = 0;
    for (const auto& root : p.positional) {
      const auto dirs = run_dirs_under(root);
      if (dirs.empty()) {
        std::cerr << "runner history --import: no run directory (one with results.jsonl) under " << root << "\n";
        return 2;
      }
      for (const auto& dir : dirs) {
        const std::int64_t id = store.import_run_dir(dir);
        if (id) std::cout << "imported " << printable(dir.string()) << " as run " << id << "\n";
        id ? ++added : ++known;
      }
    }
    std::cout << added << " run(s) imported, " << known << " already in " << file.string() << "\n";
    return 0;
  }
  if (p.vm.count("mark-good")) {
    const auto id = p.vm["mark-good"].as<std::int64_t>();
    if (!store.run(id)) {
      std::cerr << "runner history: no run " << id << " in " << file.string() << "\n";
      return 2;
    }
    store.set_verdict(id, "ok");
    std::cout << "run " << id << " is good: later `last-good` compares start from it\n";
    return 0;
  }
  RunFilter f;
  f.experiment = opt(p.vm, "experiment");
  f.device_name = opt(p.vm, "device");
  if (p.vm.count("since")) f.since = parse_since(opt(p.vm, "since"));
  if (p.vm.count("html")) {
    const fs::path dir = opt(p.vm, "html");
    const auto pages = write_trends_site(store, f, dir);
    std::cout << "wrote " << (dir / "index.html").string() << " and " << pages << " experiment page(s)\n";
    return 0;
  }
  f.limit = p.vm["limit"].as<int>();
  const auto runs = store.runs(f);
  if (p.vm.count("json")) {
    for (const auto& r : runs)
      std::cout << nlohmann::json{{"id", r.id}, {"experiment", r.experiment}, {"started", r.started},
                                  {"finished", r.finished}, {"status", r.status}, {"verdict", r.verdict},
                                  {"git_commit", r.git_commit}, {"device_name", r.device_name},
                                  {"records", r.records}, {"run_dir", r.run_dir}, {"smoke", r.smoke},
                                  {"overrides", r.overrides}, {"filter", r.filter}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(6) << "id" << std::setw(22) << "started" << std::setw(24) << "experiment"
            << std::setw(20) << "commit" << std::setw(28) << "device" << std::setw(9) << "records" << std::setw(15)
            << "status" << std::setw(36) << "overrides" << "run dir\n";
  for (const auto& r : runs) {
    std::string status = r.status;
    if (r.verdict == "regression") status += ",REGR";
    if (r.smoke) status += ",smoke";
    // Names come from imported files: a terminal escape in one must print as text.
    std::cout << std::setw(6) << r.id << std::setw(22) << printable(r.started) << std::setw(24)
              << printable(r.experiment) << std::setw(20) << (r.git_commit.empty() ? "?" : printable(r.git_commit))
              << std::setw(28) << printable(r.device_name.substr(0, 26)) << std::setw(9) << r.records << std::setw(15)
              << printable(status) << std::setw(36) << printable(asked_text(r)) << " " << printable(r.run_dir) << "\n";
  }
  if (runs.empty()) std::cout << "(no runs match)\n";
  return 0;
}

namespace {
const char* kCompareUsage =
    "usage: runner compare A B [--format table|markdown|json] [--threshold 0.05] [--alpha 0.05]\n"
    "                          [--metric NAME]... [--ignore-param NAME]... [--only-changed] [--cross-device]\n"
    "                          [--output FILE]\n"
    "  A (baseline) and B: a run directory, run:ID, a commit (abc1234 or commit:abc1234),\n"
    "  last or last-good: per point of the other side, the newest finished run started before it\n"
    "  with a point of the same identity (experiment, parameters after overrides, device, driver);\n"
    "  last-good skips runs with a failed point or a regression verdict.\n"
    "  Points match on that identity: none in common is an error (exit 2, nothing comparable).\n"
    "  Exit code 1 when a gating metric got slower or larger, or a point failed; 2 on bad input.\n"
    "  The verdict is kept in the history for B's run (a regression makes it never last-good).\n";
}  // namespace

int compare_command(const std::vector<std::string>& args) {
  po::options_description flags("compare options");
  flags.add_options()("help,h", "show this help")
      ("history", po::value<std::string>(), "history database (default: RUNNER_HISTORY, else ~/.local/share/runner/history.sqlite)")
      ("format,f", po::value<std::string>()->default_value("table"), "table, markdown or json")
      ("threshold", po::value<double>()->default_value(0.05, "0.05"), "relative change below which a metric is 'same'")
      ("alpha", po::value<double>()->default_value(0.05, "0.05"), "significance level of the Mann-Whitney U test")
      ("metric,m", po::value<std::vector<std::string>>()->composing(), "compare only these metrics, and gate on them (a,b or repeated)")
      ("ignore-param", po::value<std::vector<std::string>>()->composing(), "parameters that differ on purpose (A/B of one knob): not part of the point identity (a,b or repeated)")
      ("only-changed", "leave out rows whose verdict is 'same'")
      ("cross-device", "allow A and B from different devices (a warning says so)")
      ("experiment,e", po::value<std::string>(), "experiment for history queries (last, last-good, commits)")
      ("output,o", po::value<std::string>(), "also write the rendering to this file");
  ParsedCommandLine p;
  int code = 0;
  if (!parse_command_line(args, flags, "", kCompareUsage, p, code)) return code;
  if (p.positional.size() != 2) {
    std::cerr << "runner compare: expected two sides, A (baseline) and B\n" << kCompareUsage;
    return 2;
  }
  const std::string format = opt(p.vm, "format");
  if (format != "table" && format != "markdown" && format != "json") {
    std::cerr << "runner compare: --format '" << format << "' is not one of table, markdown, json\n";
    return 2;
  }
  CompareOptions o;
  o.threshold = p.vm["threshold"].as<double>();
  o.alpha = p.vm["alpha"].as<double>();
  if (o.threshold < 0 || o.alpha <= 0 || o.alpha >= 1) {
    std::cerr << "runner compare: --threshold must be >= 0 and --alpha in (0, 1)\n";
    return 2;
  }
  o.cross_device = p.vm.count("cross-device") > 0;
  o.only_changed = p.vm.count("only-changed") > 0;
  o.ignore_params = comma_list(p.vm, "ignore-param");
  o.metrics = comma_list(p.vm, "metric");
  try {
    const fs::path file = resolve_history_path(opt(p.vm, "history"), "");
    std::unique_ptr<HistoryStore> store;
    if (!file.empty() && fs::exists(file)) store = std::make_unique<HistoryStore>(file, HistoryAccess::read);
    const std::string experiment = opt(p.vm, "experiment");
    const std::string& spec_a = p.positional[0];
    const std::string& spec_b = p.positional[1];
    Side a, b;
    // Resolve concrete sides first: a relative query ("last-good") takes its
    // experiment and device from the other side.
    if (is_relative_query(spec_a) && !is_relative_query(spec_b)) {
      b = resolve_side(spec_b, store.get(), nullptr, experiment, o);
      a = resolve_side(spec_a, store.get(), &b, experiment, o);
    } else {
      a = resolve_side(spec_a, store.get(), nullptr, experiment, o);
      b = resolve_side(spec_b, store.get(), &a, experiment, o);
    }
    if (store) add_lookback(o, *store, b);
    // Deliberately leaked: the process ends right after, and freeing two sides of
    // 10,000 records and 20,000 rows one by one costs a tenth of the compare.
    const Comparison& c = *new Comparison(compare(std::move(a), std::move(b), o));
    auto render = [&](std::ostream& out, bool color) {
      if (format == "json") write_json(c, out);
      else if (format == "markdown") render_markdown(c, out);
      else render_table(c, out, color);
    };
    render(std::cout, isatty(STDOUT_FILENO) != 0);
    std::cout.flush();
    if (p.vm.count("output")) {
      std::ofstream out(opt(p.vm, "output"));
      render(out, false);
      if (!out) throw std::runtime_error("cannot write " + opt(p.vm, "output"));
    }
    // Every compare judges B's run in the history (manual ones too), where it can be written.
    if (store && !store->read_only().empty() &&
        std::any_of(c.b.runs.begin(), c.b.runs.end(), [](const RunInfo& r) { return r.id != 0; }))
      std::cerr << "runner compare: the verdict is not kept: history " << store->file().string()
                << " cannot be written (" << store->read_only() << ")\n";
    else if (store)
      for (const RunInfo& run : c.b.runs)
        if (run.id) store->record_compare(run.id, spec_a + " = " + c.a.description, c.regression(), verdict_counts(c));
    return c.regression() ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "runner compare: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace runner::history
