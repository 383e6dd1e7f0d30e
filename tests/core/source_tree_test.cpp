// The host's sources hold code: no .cpp file made only of comments sits in the
// build where a reader would look for behaviour.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {

bool has_code(const std::filesystem::path& file) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line.compare(first, 2, "//") == 0 || line[first] == '#') continue;
    return true;
  }
  return false;
}

TEST(SourceTree, EveryHostSourceFileHoldsCode) {
  const std::filesystem::path src = std::filesystem::path(RUNNER_SOURCE_DIR) / "runner";
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    if (entry.path().extension() != ".cpp") continue;
    ++checked;
    EXPECT_TRUE(has_code(entry.path())) << entry.path() << " has no code: finish it or delete it";
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
