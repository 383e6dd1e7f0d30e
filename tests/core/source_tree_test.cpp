// The source tree keeps its conventions: no host .cpp file made only of comments sits
// in the build where a reader would look for behaviour, and each plugin folder holds
// its manifest in <name>.cpp and its own tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

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

// One plugin = one folder plugins/<kind>/<name>/ whose manifest (RUNNER_PLUGIN) lives in
// <name>.cpp, beside tests of its own (the README's "Adding a plugin").
TEST(SourceTree, EveryPluginKeepsItsManifestInNameDotCppAndItsTestsBesideIt) {
  const std::filesystem::path plugins = std::filesystem::path(RUNNER_SOURCE_DIR) / "plugins";
  int checked = 0;
  for (const auto& kind : std::filesystem::directory_iterator(plugins)) {
    if (!kind.is_directory()) continue;
    for (const auto& folder : std::filesystem::directory_iterator(kind.path())) {
      if (!folder.is_directory()) continue;
      const std::string name = folder.path().filename().string();
      const std::string id = kind.path().filename().string() + "/" + name;
      ++checked;
      bool has_tests = false;
      for (const auto& file : std::filesystem::directory_iterator(folder.path())) {
        const std::string file_name = file.path().filename().string();
        has_tests = has_tests || file_name.find("_test.") != std::string::npos;
        if (file.path().extension() != ".cpp" || file_name == name + ".cpp") continue;
        std::ifstream in(file.path());
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_EQ(text.find("RUNNER_PLUGIN("), std::string::npos)
            << file.path() << ": the manifest belongs in " << name << ".cpp (git mv it there)";
      }
      EXPECT_TRUE(std::filesystem::exists(folder.path() / (name + ".cpp")))
          << id << ": no " << name << ".cpp";
      EXPECT_TRUE(has_tests) << id << ": no tests in the folder (<name>_test.cpp)";
    }
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
