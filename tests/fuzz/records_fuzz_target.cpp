// Fuzz target for the read side of results.jsonl: the report reader and
// everything that renders what it read (tables with rows, columns, ratios and a
// pivot, Markdown, LaTeX and CSV, figure data, the run sentence). The input is
// the file. The reader may refuse it with a std::runtime_error naming the file
// and line; any other exception (a bare nlohmann type_error) or sanitizer report
// is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "report/report.hpp"

namespace {

using namespace runner::report;

const ReportSpec& spec() {
  static const ReportSpec parsed = parse_report_spec(YAML::Load(R"(
id: fuzz
title: records fuzz
tables:
  - name: columns
    rows: [size, item]
    columns:
      - {id: t, metric: time_ms, stat: median, format: "%.2f", show_std: true, noise: percent}
      - {id: u, metric: time_ms, where: {op: copy}}
      - {header: speedup, ratio: [u, t]}
      - {metric: word}
      - {key: op}
  - name: pivot
    rows: [size]
    pivot: op
    metric: time_ms
    format: "%d"
figures:
  - {name: line, x: size, series: [op], metric: time_ms, error_bars: true, logx: true}
)"), "fuzz.yaml");
  return parsed;
}

std::filesystem::path scratch_file() {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("runner-records-fuzz-" + std::to_string(getpid()) + ".jsonl");
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(scratch_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::vector<runner::StoredRecord> records;
  try {
    std::vector<std::string> warnings;
    records = read_results(scratch_file(), &warnings);
  } catch (const std::runtime_error&) {
    return 0;  // refused with file and line
  }
  for (const TableSpec& table : spec().tables) {
    try {
      const BuiltTable built = build_table(table, records);
      (void)to_markdown(built);
      (void)to_latex(built, "fuzz");
      (void)to_csv(built);
    } catch (const SpecError&) {
    }
  }
  for (const FigureSpec& figure : spec().figures) {
    (void)figure_data(figure, records);
    (void)figure_caption(figure, records);
  }
  (void)run_sentence(RunSummary{false, 4}, records);
  return 0;
}
