// Finds plugin shared libraries, checks their API version and keeps them loaded
// for the life of the process. A bad file becomes a LoadError, never a crash.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runner/context.hpp"
#include "runner/plugin.hpp"

namespace runner {

struct LoadedPlugin {
  const PluginManifest* manifest = nullptr;
  std::filesystem::path file;
};

struct LoadError {
  std::filesystem::path file;
  std::string message;
};

class PluginRegistry : public PluginFactory {
 public:
  PluginRegistry();
  ~PluginRegistry() override;

  // Loads every *.so in each directory (non-recursive); missing dirs are ignored.
  void scan(const std::vector<std::filesystem::path>& dirs);
  // Loads one file; returns false (and records a LoadError) if it is not a usable plugin.
  // Files are first loaded in a child process (see load_files).
  bool load_file(const std::filesystem::path& file);
  // Loads files that a child process loaded first without crashing, calling
  // exit() or hanging (RUNNER_PLUGIN_LOAD_TIMEOUT_S, default 30); the others, and
  // paths that are not regular files, become LoadErrors that say what happened.
  void load_files(const std::vector<std::filesystem::path>& files);
  // Loads one file here, unprobed (the probe child does this).
  bool load_file_in_process(const std::filesystem::path& file);

  // A manifest compiled into this process (tests, the config fuzzer); `origin`
  // stands in for the file. Same duplicate rule as load_file.
  bool add_manifest(const PluginManifest* manifest, const std::filesystem::path& origin);

  const PluginManifest* find(PluginKind kind, const std::string& name) const;
  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<LoadError>& load_errors() const { return errors_; }
  std::vector<std::string> names(PluginKind kind) const;
  // Things about the search path a user should hear (world-writable directories).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Throws runner::ConfigError if no plugin of that kind and name is loaded.
  std::unique_ptr<PluginBase> create(PluginKind kind, const Params& params,
                                     Context& ctx) const override;
  // Throws runner::ConfigError if there is no such plugin, std::runtime_error if it declares no facts.
  std::map<std::string, double> facts(PluginKind kind, const Params& params) const override;

  // The build's plugin dir (next to the runner binary), then RUNNER_PLUGIN_PATH
  // (colon-separated), then `extra` (--plugin-path).
  static std::vector<std::filesystem::path> search_path(
      const std::vector<std::filesystem::path>& extra);

 private:
  struct Library;
  std::vector<std::unique_ptr<Library>> libraries_;
  std::vector<LoadedPlugin> plugins_;
  std::vector<LoadError> errors_;
  std::vector<std::string> warnings_;
};

// True in the child that probes plugin files: an exit() there ends it at once
// (the parent's atexit handlers and static destructors are not the child's).
bool in_plugin_probe();

// "libtorch=2.11.0 cxx11_abi=1": what a plugin's runner_plugin_build_info() must say.
std::string host_build_info();

}  // namespace runner
