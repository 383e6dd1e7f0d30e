// A plugin's options are described once, in its manifest: the option table of its
// README is generated from it (scripts/plugin_readme_tables.py, which writes what
// `runner describe <kind>/<name> --markdown` prints), and this test fails while a
// README's table differs.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "config/catalog.hpp"
#include "test_support.hpp"

namespace runner {
namespace {

// The README's block of '|' lines that starts with "| option |" ("" without one).
std::string readme_table(const std::string& readme) {
  std::istringstream in(readme);
  std::string table;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside && line.rfind("| option |", 0) == 0) inside = true;
    if (!inside) continue;
    if (line.empty() || line[0] != '|') break;
    table += line + "\n";
  }
  return table;
}

TEST(PluginReadme, OptionTableIsTheManifests) {
  int checked = 0;
  for (const auto& plugin : testing::test_registry().plugins()) {
    if (plugin.file.parent_path().filename() == "extra") continue;  // test plugins
    const PluginManifest& m = *plugin.manifest;
    const std::string folder = std::string("plugins/") + to_string(m.kind) + "/" + m.name;
    const auto readme = std::filesystem::path(RUNNER_SOURCE_DIR) / folder / "README.md";
    ASSERT_TRUE(std::filesystem::exists(readme)) << folder << " has no README.md";
    ++checked;
    EXPECT_EQ(readme_table(testing::read_file(readme)), option_table(m))
        << folder << "/README.md: its option table is not the manifest's; run scripts/plugin_readme_tables.py";
  }
  EXPECT_GE(checked, 20);
}

TEST(PluginReadme, TableCellsKeepPipesAndLineBreaksInside) {
  PluginManifest m;
  m.options = {opt_enum("mode", {"a", "b"}, "a", "a|b\nor c")};
  EXPECT_EQ(option_table(m), "| option | type | default | meaning |\n|---|---|---|---|\n"
                             "| mode | one of a, b | a | a\\|b or c |\n");
  EXPECT_EQ(option_table(PluginManifest{}), "");
}

}  // namespace
}  // namespace runner
