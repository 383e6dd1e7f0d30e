#include <gtest/gtest.h>

#include "config/registry.hpp"
#include "test_support.hpp"
#include "config/validate.hpp"

namespace runner {
namespace {

const std::filesystem::path kTestPlugins = RUNNER_TEST_PLUGIN_DIR;

std::string error_for(const PluginRegistry& r, const std::string& file_name) {
  for (const auto& e : r.load_errors())
    if (e.file.filename() == file_name) return e.message;
  return "(loaded without error)";
}

TEST(Registry, BadFilesAreSkippedWithAReasonAndNeverCrash) {
  PluginRegistry r;
  r.scan({kTestPlugins});
  EXPECT_TRUE(r.plugins().empty());
  EXPECT_EQ(error_for(r, "test_throwing_manifest.so"), "plugin threw while loading: manifest exploded on purpose");
  EXPECT_EQ(error_for(r, "test_wrong_api.so"),
            "built against plugin API " + std::to_string(kPluginApiVersion + 41) + ", this runner speaks " +
                std::to_string(kPluginApiVersion) + "; rebuild the plugin");
  EXPECT_EQ(error_for(r, "test_not_a_plugin.so"), "not a runner plugin (no runner_plugin_manifest symbol)");
  EXPECT_EQ(error_for(r, "garbage.so"), "cannot load: not a shared library (no ELF header)");
}

TEST(Registry, PluginBuiltWithAnotherCxxAbiIsSkippedWithTheReason) {
  PluginRegistry r;
  EXPECT_FALSE(r.load_file(kTestPlugins / "test_abi_mismatch.so"));
  const std::string message = error_for(r, "test_abi_mismatch.so");
  EXPECT_NE(message.find("cxx11_abi=0"), std::string::npos) << message;
  EXPECT_NE(message.find("this runner has " + host_build_info()), std::string::npos) << message;
}

TEST(Registry, PluginBuiltAgainstAnotherLibTorchIsSkippedWithTheReason) {
  PluginRegistry r;
  EXPECT_FALSE(r.load_file(kTestPlugins / "test_torch_mismatch.so"));
  EXPECT_NE(error_for(r, "test_torch_mismatch.so").find("built with libtorch=1.13.1"), std::string::npos)
      << error_for(r, "test_torch_mismatch.so");
}

TEST(Registry, WorldWritablePluginDirectoryIsWarnedAbout) {
  const auto dir = testing::fresh_dir("registry-open");
  std::filesystem::permissions(dir, std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  PluginRegistry r;
  r.scan({dir});
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_NE(r.warnings()[0].find("world-writable"), std::string::npos);
  PluginRegistry closed;
  closed.scan({testing::fresh_dir("registry-closed")});
  EXPECT_TRUE(closed.warnings().empty());
}

TEST(Registry, LoadsAPluginAndCreatesIt) {
  PluginRegistry r;
  ASSERT_TRUE(r.load_file(kTestPlugins / "extra" / "test_echo.so"));
  const PluginManifest* m = r.find(PluginKind::Task, "echo");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->description, "test task: echoes options as metrics, fails on request");
  EXPECT_EQ(r.names(PluginKind::Task), std::vector<std::string>{"echo"});
  EXPECT_EQ(r.find(PluginKind::Model, "echo"), nullptr);
}

TEST(Registry, SecondCopyOfAPluginIsSkipped) {
  PluginRegistry r;
  ASSERT_TRUE(r.load_file(kTestPlugins / "extra" / "test_echo.so"));
  const auto copy = testing::fresh_dir("registry") / "echo_copy.so";
  std::filesystem::copy_file(kTestPlugins / "extra" / "test_echo.so", copy);
  EXPECT_FALSE(r.load_file(copy));
  EXPECT_NE(error_for(r, "echo_copy.so").find("is already loaded from"), std::string::npos);
}

TEST(Registry, SearchPathReadsRunnerPluginPathInOrder) {
  setenv("RUNNER_PLUGIN_PATH", "/a:/b", 1);
  const auto dirs = PluginRegistry::search_path({"/c"});
  unsetenv("RUNNER_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0].filename(), "plugins");
  EXPECT_EQ(dirs[1], "/a");
  EXPECT_EQ(dirs[2], "/b");
  EXPECT_EQ(dirs[3], "/c");
}

TEST(Registry, CreatingAnUnknownPluginSuggestsAName) {
  PluginRegistry r;
  r.load_file(kTestPlugins / "extra" / "test_echo.so");
  Context ctx;
  Params p("eco");
  try {
    r.create(PluginKind::Task, p, ctx);
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "no task plugin named 'eco'; did you mean 'echo'?");
  }
}

}  // namespace
}  // namespace runner
