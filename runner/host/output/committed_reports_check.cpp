#include "output/committed_reports_check.hpp"

#include <cstdlib>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "config/experiment.hpp"
#include "output/run_reports.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first line where two texts differ, as "line N: committed '...' vs rendered '...'".
std::string first_difference(const std::string& committed, const std::string& rendered) {
  std::istringstream a(committed), b(rendered);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la)), hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "line endings differ";
    if (la != lb || ha != hb) {
      const auto cut = [](const std::string& s) { return s.size() > 100 ? s.substr(0, 100) + "..." : s; };
      return "line " + std::to_string(line) + ": committed '" + (ha ? cut(la) : "(end)") + "', rendered '" +
             (hb ? cut(lb) : "(end)") + "'";
    }
  }
}

// POSIX, not std::filesystem::remove_all: libtorch.so exports an incompatible copy of that
// symbol, which the dynamic linker may bind here (it crashes; see distributed/launch.cpp).
void remove_tree(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(dir, ec)) entries.push_back(entry.path());
  for (const auto& path : entries) {
    if (fs::is_directory(fs::symlink_status(path, ec))) remove_tree(path);
    else unlink(path.c_str());
  }
  rmdir(dir.c_str());
}

struct Render {
  fs::path spec;
  std::vector<fs::path> runs;
};

// <reports>/renders.txt: "<experiment file> <run dir> [<run dir>...]" per line, paths relative
// to the repository root (the parent of reports/), # comments. Keyed by the first run's path.
std::map<std::string, Render> read_renders(const fs::path& reports_dir, const fs::path& root) {
  std::map<std::string, Render> out;
  std::ifstream in(reports_dir / "renders.txt");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Render r;
    std::string word;
    if (!(words >> word)) continue;
    r.spec = root / word;
    while (words >> word) r.runs.push_back(root / word);
    if (r.runs.empty())
      throw ConfigError((reports_dir / "renders.txt").string() + ":" + std::to_string(n) +
                        ": expected '<experiment file> <run dir>...'");
    out[fs::weakly_canonical(r.runs.front()).string()] = r;
  }
  return out;
}

}  // namespace

int check_committed_reports(const fs::path& reports_dir, const fs::path& experiments_dir, const fs::path& scratch,
                            std::ostream& out) {
  const fs::path root = reports_dir.parent_path().empty() ? fs::path(".") : reports_dir.parent_path();
  const auto listed = read_renders(reports_dir, root);
  std::set<fs::path> merged_away;  // runs that render as part of a listed merge
  for (const auto& [first, r] : listed)
    for (std::size_t i = 1; i < r.runs.size(); ++i) merged_away.insert(fs::weakly_canonical(r.runs[i]));

  // <reports>/<experiment>/data/ is the run of experiments/<experiment>.yaml; other runs kept
  // beside it (<reports>/<experiment>/runs/<what>/) render nothing of their own.
  std::vector<Render> renders;
  for (const auto& entry : fs::directory_iterator(reports_dir)) {
    const fs::path run = entry.path() / "data";
    const std::string experiment = entry.path().filename().string();
    if (!fs::exists(run / "config.yaml") || merged_away.count(fs::weakly_canonical(run))) continue;
    const StoredRunConfig config(run / "config.yaml");
    if (!config.has_report || config.experiment_name != experiment) continue;
    if (const auto it = listed.find(fs::weakly_canonical(run).string()); it != listed.end()) {
      renders.push_back(it->second);
      continue;
    }
    const fs::path spec = experiments_dir / (experiment + ".yaml");
    if (!fs::exists(spec)) {
      out << run.string() << ": no " << spec.string() << " to render it with; name one in "
          << (reports_dir / "renders.txt").string() << "\n";
      return 1;
    }
    renders.push_back({spec, {run}});
  }

  // The prose merges into a copy of the committed <id>/<id>.md files and of the Markdown that
  // quotes their values (kernels/*/README.md, beside the copy as beside reports/); everything
  // else is written fresh. The copy holds renders.txt, so it is rendered as the project's.
  const fs::path project = scratch;
  const fs::path copy = scratch / "reports";
  remove_tree(project);
  fs::create_directories(copy);
  if (fs::exists(reports_dir / "renders.txt")) fs::copy_file(reports_dir / "renders.txt", copy / "renders.txt");
  else std::ofstream(copy / "renders.txt") << "# the copy of " << reports_dir.string() << "\n";
  for (const auto& folder : fs::directory_iterator(reports_dir)) {
    const fs::path md = folder.path() / (folder.path().filename().string() + ".md");
    if (!fs::is_regular_file(md)) continue;
    fs::create_directories(copy / folder.path().filename());
    fs::copy_file(md, copy / folder.path().filename() / md.filename());
  }
  const std::vector<fs::path> citing = report::citing_markdown(reports_dir);
  for (const auto& readme : citing) {
    const fs::path into = project / "kernels" / readme.parent_path().filename() / readme.filename();
    fs::create_directories(into.parent_path());
    fs::copy_file(readme, into);
  }
  ::setenv("RUNNER_SKIP_FIGURES", "1", 1);
  // Dirty records render, with the caption --allow-dirty writes: a committed report of such
  // records must have been rendered so.
  for (const auto& r : renders) render_reports(r.runs, copy, r.spec, true);

  int stale = 0;
  std::size_t compared = 0;
  // The report folders some render wrote (every render writes <id>.tex; a copied .md alone
  // is prose no checked run renders), and their files: <id>/<file>, figures are not drawn.
  std::set<fs::path> rendered_ids;
  std::vector<fs::path> rendered;
  for (const auto& folder : fs::directory_iterator(copy)) {
    if (!folder.is_directory()) continue;
    const fs::path id = folder.path().filename();
    if (!fs::exists(folder.path() / (id.string() + ".tex"))) continue;
    rendered_ids.insert(id);
    for (const auto& entry : fs::directory_iterator(folder.path()))
      if (entry.is_regular_file()) rendered.push_back(id / entry.path().filename());
  }
  for (const auto& file : rendered) {
    const fs::path committed = reports_dir / file;
    ++compared;
    if (!fs::exists(committed)) {
      out << committed.string() << ": missing; `runner report` writes it\n";
      ++stale;
      continue;
    }
    const std::string a = read_all(committed), b = read_all(copy / file);
    if (a != b) {
      out << committed.string() << ": stale (" << first_difference(a, b) << ")\n";
      ++stale;
    }
  }
  // A table file (<id>.<table>.csv, <id>.values.tex) no render writes is left over from a
  // table since renamed or removed.
  for (const auto& id : rendered_ids) {
    if (!fs::is_directory(reports_dir / id)) continue;
    for (const auto& entry : fs::directory_iterator(reports_dir / id)) {
      const std::string ext = entry.path().extension().string();
      if ((ext == ".csv" || ext == ".tex") && entry.path().stem().extension() != "" &&
          !fs::exists(copy / id / entry.path().filename())) {
        out << entry.path().string() << ": no report writes it any more; delete it\n";
        ++stale;
      }
    }
  }
  // The Markdown that quotes reports' values: as the renders left their copies.
  for (const auto& readme : citing) {
    ++compared;
    const std::string a = read_all(readme),
                      b = read_all(project / "kernels" / readme.parent_path().filename() / readme.filename());
    if (a != b) {
      out << readme.string() << ": stale (" << first_difference(a, b) << "); `runner report` of the report it quotes "
          << "renders it\n";
      ++stale;
    }
  }
  out << (stale ? std::to_string(stale) + " of " : "all ") << compared << " rendered report files "
      << (stale ? "differ from the committed ones" : "match the committed ones") << " (" << renders.size()
      << " renders from " << (reports_dir / "*" / "data").string() << ")\n";
  remove_tree(scratch);
  return stale ? 1 : 0;
}

}  // namespace runner
