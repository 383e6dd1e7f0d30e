// `runner report --check`: every committed report is what its records render today.
#pragma once
#include <filesystem>
#include <iosfwd>

namespace runner {

// Re-renders every report of <reports>/<experiment>/data/ (a run whose experiment is named
// like its folder, with experiments/<experiment>.yaml's report spec; <reports>/renders.txt
// lists reports merged from several runs) into `scratch`, a copy of the committed prose
// (<reports>/<id>/<id>.md), and compares each written table (.md blocks, .tex, .csv) and
// value file with the committed <reports>/<id>/ one. Figures are not drawn. Prints one line per stale file on `out`; returns 0 when
// none is, 1 otherwise. `scratch` is removed afterwards.
int check_committed_reports(const std::filesystem::path& reports_dir, const std::filesystem::path& experiments_dir,
                            const std::filesystem::path& scratch, std::ostream& out);

}  // namespace runner
