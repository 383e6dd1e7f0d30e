// Fuzz target for the history's import of a run directory: results.jsonl (the
// input) read line by line into an in-memory store, the records read back, and
// the run compared with itself and as a run directory. Refusals are
// std::runtime_error naming the file and line; any other exception or
// sanitizer report is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "history/compare.hpp"
#include "history/store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runner::history;
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("runner-history-fuzz-" + std::to_string(getpid()));
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  {
    std::ofstream out(dir / "results.jsonl", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  HistoryStore store(":memory:");
  std::int64_t id = 0;
  try {
    id = store.import_run_dir(dir);
  } catch (const std::runtime_error&) {
    return 0;
  }
  const auto records = store.records(id);
  Side a = resolve_side("run:" + std::to_string(id), &store, nullptr, "");
  try {
    Side b = resolve_side(dir.string(), &store, &a, "");
    CompareOptions o;
    o.cross_device = true;
    const Comparison c = compare(std::move(a), std::move(b), o);
    std::ostringstream out;
    render_table(c, out, true);
    render_markdown(c, out);
    write_json(c, out);
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
