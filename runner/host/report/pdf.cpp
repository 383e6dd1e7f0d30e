// `runner report --pdf`: the writeup (reports/writeup.tex, which \inputs the generated
// .tex files) built with latexmk. A PDF with "??" for a reference or a silently
// skipped input is worse than none, so the log decides too, not only the exit code.
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "report/process.hpp"
#include "report/report.hpp"

namespace runner::report {
namespace {

// Auxiliary files LaTeX writes itself on a first pass; their absence is not a missing input.
bool written_by_latex(const std::string& file) {
  for (const char* ext : {".aux", ".toc", ".lof", ".lot", ".out", ".bbl", ".nav", ".snm"})
    if (file.size() >= std::string(ext).size() && file.compare(file.size() - std::string(ext).size(), std::string::npos, ext) == 0)
      return true;
  return false;
}

}  // namespace

std::string latex_log_problem(const std::string& log) {
  // An error stops the pass, which leaves every later reference undefined: name the
  // error first, then a missing file, then an undefined reference.
  std::string found[3];
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool undefined = line.find("LaTeX Warning: Reference `") != std::string::npos ||
                           line.find("LaTeX Warning: Citation `") != std::string::npos ||
                           line.find("There were undefined references") != std::string::npos;
    const bool missing_file = line.find("Error: File `") != std::string::npos && line.find("not found") != std::string::npos;
    bool missing_input = false;
    if (line.rfind("No file ", 0) == 0) {
      std::string file = line.substr(8);
      if (!file.empty() && file.back() == '.') file.pop_back();
      missing_input = !written_by_latex(file);
    }
    // Errors: "! ..." normally, "<file>.tex:<line>: ..." under -file-line-error.
    static const std::regex file_line_error(R"(^\S+\.(tex|sty|cls):[0-9]+: .*)");
    const bool error = line.rfind("! ", 0) == 0 || std::regex_match(line, file_line_error);
    const int rank = error ? 0 : (missing_file || missing_input) ? 1 : undefined ? 2 : -1;
    if (rank >= 0 && found[rank].empty()) found[rank] = line;
  }
  for (const std::string& line : found)
    if (!line.empty()) return line;
  return "";
}

std::filesystem::path build_pdf(const std::filesystem::path& reports_dir) {
  const std::filesystem::path tex = reports_dir / "writeup.tex";
  if (!std::filesystem::exists(tex))
    throw std::runtime_error(tex.string() + ": no such file; the writeup's source lives at reports/writeup.tex");
  const std::filesystem::path build_dir = reports_dir / ".latex";  // aux, log, fls: git-ignored
  std::filesystem::create_directories(build_dir);
  const std::filesystem::path console = build_dir / "latexmk.out";
  const int status = detail::run_program({"latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                                          "-file-line-error", "-outdir=.latex", "writeup.tex"},
                                         console, reports_dir);
  if (status == -1 || status == 127)
    throw std::runtime_error(
        "latexmk not found: install it and TeX Live (Debian: apt-get install latexmk texlive-latex-base "
        "texlive-latex-recommended lmodern; scripts/setup.sh does)");
  std::ifstream log_in(build_dir / "writeup.log", std::ios::binary);
  std::ostringstream log;
  log << log_in.rdbuf();
  const std::string problem = latex_log_problem(log.str());
  if (!problem.empty())
    throw std::runtime_error((build_dir / "writeup.log").string() + ": " + problem);
  if (status != 0)
    throw std::runtime_error("latexmk failed (exit " + std::to_string(status) + "): " +
                             detail::last_log_line(console) + " (full output: " + console.string() + ")");
  const std::filesystem::path pdf = reports_dir / "writeup.pdf";
  std::filesystem::copy_file(build_dir / "writeup.pdf", pdf, std::filesystem::copy_options::overwrite_existing);
  return pdf;
}

}  // namespace runner::report
