#include "registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <dlfcn.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "errors.hpp"
#include "text_distance.hpp"

namespace runner {
namespace {

// Why dlopen refuses a file, in the loader's own words (Boost.DLL's exception
// text is often an unrelated errno such as "Bad file descriptor").
std::string why_not_loadable(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || magic[0] != 0x7f || magic[1] != 'E' || magic[2] != 'L' || magic[3] != 'F')
    return "not a shared library (no ELF header)";
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return "";
  }
  const char* reason = dlerror();
  return reason ? reason : "the dynamic loader refused it";
}

}  // namespace

std::string host_build_info() { return RUNNER_PLUGIN_BUILD_INFO; }

struct PluginRegistry::Library {
  boost::dll::shared_library handle;
};

PluginRegistry::PluginRegistry() = default;
// Libraries are deliberately leaked at exit: objects from plugins (e.g. tensors
// holding plugin-defined autograd nodes) may outlive the registry.
PluginRegistry::~PluginRegistry() {
  for (auto& lib : libraries_) (void)lib.release();
}

void PluginRegistry::scan(const std::vector<std::filesystem::path>& dirs) {
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    // Anyone who can write here can make this process run their code.
    const auto perms = std::filesystem::status(dir, ec).permissions();
    if (!ec && (perms & std::filesystem::perms::others_write) != std::filesystem::perms::none)
      warnings_.push_back("plugin directory " + dir.string() +
                          " is world-writable: any user can plant a plugin there (chmod o-w it)");
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_file(f);
  }
}

bool PluginRegistry::load_file(const std::filesystem::path& file) {
  auto fail = [&](const std::string& message) {
    errors_.push_back({file, message});
    return false;
  };
  auto lib = std::make_unique<Library>();
  try {
    lib->handle.load(boost::dll::fs::path(file.string()),
                     boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    const std::string reason = why_not_loadable(file);
    return fail("cannot load: " + (reason.empty() ? std::string(e.what()) : reason));
  }
  if (!lib->handle.has("runner_plugin_api_version") || !lib->handle.has("runner_plugin_manifest")) {
    return fail("not a runner plugin (no runner_plugin_manifest symbol)");
  }
  const PluginManifest* manifest = nullptr;
  try {
    const int api = lib->handle.get<int()>("runner_plugin_api_version")();
    if (api != kPluginApiVersion) {
      return fail("built against plugin API " + std::to_string(api) + ", this runner speaks " +
                  std::to_string(kPluginApiVersion) + "; rebuild the plugin");
    }
    // Checked before the manifest is touched: its strings and vectors only mean the
    // same thing to both sides when LibTorch and the C++ ABI agree.
    if (!lib->handle.has("runner_plugin_build_info"))
      return fail("records no build info (LibTorch version, C++ ABI); rebuild the plugin against this runner");
    const char* info = lib->handle.get<const char*()>("runner_plugin_build_info")();
    const std::string plugin_info = info ? info : "";
    if (plugin_info != host_build_info())
      return fail("built with " + plugin_info + ", this runner has " + host_build_info() +
                  "; rebuild the plugin against this runner's LibTorch");
    manifest = lib->handle.get<const PluginManifest*()>("runner_plugin_manifest")();
  } catch (const std::exception& e) {
    return fail(std::string("plugin threw while loading: ") + e.what());
  } catch (...) {
    return fail("plugin threw a non-standard exception while loading");
  }
  if (manifest == nullptr || manifest->name.empty() || !manifest->create) {
    return fail("manifest is incomplete (needs a name and a create function)");
  }
  if (!add_manifest(manifest, file)) return false;
  libraries_.push_back(std::move(lib));
  return true;
}

bool PluginRegistry::add_manifest(const PluginManifest* manifest, const std::filesystem::path& origin) {
  if (const PluginManifest* existing = find(manifest->kind, manifest->name)) {
    for (const auto& p : plugins_) {
      if (p.manifest == existing) {
        errors_.push_back({origin, std::string(to_string(manifest->kind)) + "/" + manifest->name +
                                       " is already loaded from " + p.file.string() + "; skipped"});
        return false;
      }
    }
  }
  plugins_.push_back({manifest, origin});
  return true;
}

const PluginManifest* PluginRegistry::find(PluginKind kind, const std::string& name) const {
  for (const auto& p : plugins_)
    if (p.manifest->kind == kind && p.manifest->name == name) return p.manifest;
  return nullptr;
}

std::vector<std::string> PluginRegistry::names(PluginKind kind) const {
  std::vector<std::string> out;
  for (const auto& p : plugins_)
    if (p.manifest->kind == kind) out.push_back(p.manifest->name);
  return out;
}

std::unique_ptr<PluginBase> PluginRegistry::create(PluginKind kind, const Params& params,
                                                   Context& ctx) const {
  const PluginManifest* m = find(kind, params.plugin_name());
  if (m == nullptr) {
    throw ConfigError(std::string("no ") + to_string(kind) + " plugin named '" + params.plugin_name() +
                      "'" + suggestion(params.plugin_name(), names(kind)));
  }
  return m->create(params, ctx);
}

std::map<std::string, double> PluginRegistry::facts(PluginKind kind, const Params& params) const {
  const PluginManifest* m = find(kind, params.plugin_name());
  if (m == nullptr) {
    throw ConfigError(std::string("no ") + to_string(kind) + " plugin named '" + params.plugin_name() +
                      "'" + suggestion(params.plugin_name(), names(kind)));
  }
  if (!m->facts)
    throw std::runtime_error(std::string(to_string(kind)) + " plugin '" + params.plugin_name() +
                             "' declares no facts (PluginManifest::facts)");
  return m->facts(params);
}

std::vector<std::filesystem::path> PluginRegistry::search_path(
    const std::vector<std::filesystem::path>& extra) {
  std::vector<std::filesystem::path> dirs;
  const auto exe_dir = std::filesystem::path(boost::dll::program_location().parent_path().string());
  dirs.push_back(exe_dir / "plugins");
  if (const char* env = std::getenv("RUNNER_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs.emplace_back(item);
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  return dirs;
}

}  // namespace runner
