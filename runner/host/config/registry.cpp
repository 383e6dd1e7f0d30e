#include "config/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "base/errors.hpp"
#include "base/text_distance.hpp"

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

bool g_probe_child = false;

std::chrono::milliseconds probe_timeout() {
  const char* env = std::getenv("RUNNER_PLUGIN_LOAD_TIMEOUT_S");
  const double seconds = env && *env ? std::atof(env) : 30.0;
  return std::chrono::milliseconds(static_cast<long>(1000 * (seconds > 0 ? seconds : 30.0)));
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status))
    return std::string("crashed the process loading it (") + strsignal(WTERMSIG(status)) +
           "): a bug in its static constructors or manifest";
  return "ended the process loading it with exit(" + std::to_string(WEXITSTATUS(status)) +
         ") in its static constructors or manifest";
}

// Loads files[from], files[from + 1], ... in a child process and reports each
// one it survives through a pipe. Returns the index of the first file that
// crashed, ended or hung the child, with why; files.size() when none did.
std::pair<std::size_t, std::string> probe_from(const std::vector<std::filesystem::path>& files, std::size_t from) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {files.size(), ""};  // cannot probe: load as before
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {files.size(), ""};
  }
  if (pid == 0) {
    close(fds[0]);
    g_probe_child = true;
    for (std::size_t i = from; i < files.size(); ++i) {
      PluginRegistry probe;
      probe.load_file_in_process(files[i]);
      for (const auto& plugin : probe.plugins()) {  // what `plugins` and `describe` read
        const PluginManifest& m = *plugin.manifest;
        std::size_t touched = m.name.size() + m.version.size() + m.description.size();
        for (const auto& o : m.options) touched += o.name.size() + o.help.size() + o.default_value.to_string().size();
        (void)touched;
      }
      if (write(fds[1], &i, sizeof i) != static_cast<ssize_t>(sizeof i)) break;
    }
    syscall(SYS_exit_group, 0);
  }
  close(fds[1]);
  std::size_t next = from;
  const auto timeout = probe_timeout();
  while (true) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready < 0 && errno == EINTR) continue;
    std::size_t done = 0;
    const ssize_t n = ready > 0 ? read(fds[0], &done, sizeof done) : -1;
    if (n == static_cast<ssize_t>(sizeof done)) {
      next = done + 1;
      continue;
    }
    int status = 0;
    if (ready == 0) kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(fds[0]);
    if (ready == 0)
      return {next, "did not finish loading within " + std::to_string(timeout.count() / 1000.0).substr(0, 4) +
                        " s (a static constructor that never returns?); set RUNNER_PLUGIN_LOAD_TIMEOUT_S to wait longer"};
    if (next >= files.size() && WIFEXITED(status) && WEXITSTATUS(status) == 0) return {files.size(), ""};
    return {next, how_it_ended(status)};
  }
}

// Why a path named *.so cannot be a plugin without opening it (a FIFO would
// block the open forever), or "".
std::string not_a_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec) return "cannot read: " + ec.message();
  if (std::filesystem::is_directory(status)) return "is a directory, not a shared library";
  if (!std::filesystem::is_regular_file(status)) return "is not a regular file (a FIFO, socket or device), not a shared library";
  return "";
}

}  // namespace

bool in_plugin_probe() { return g_probe_child; }

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
  std::vector<std::filesystem::path> all;  // probed together: one child for every file
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
    all.insert(all.end(), files.begin(), files.end());
  }
  load_files(all);
}

bool PluginRegistry::load_file(const std::filesystem::path& file) {
  const size_t before = plugins_.size();
  load_files({file});
  return plugins_.size() > before;
}

void PluginRegistry::load_files(const std::vector<std::filesystem::path>& candidates) {
  // Loading runs the plugin's code: a crash, exit() or hang there must not take
  // this process down with no word. Each file is loaded in a child first; only
  // files it survives are loaded here.
  std::vector<std::filesystem::path> files;
  for (const auto& f : candidates) {
    if (const std::string why = not_a_file(f); !why.empty()) errors_.push_back({f, why});
    else files.push_back(f);
  }
  std::vector<std::string> fatal(files.size());
  for (std::size_t from = 0; from < files.size();) {
    const auto [bad, why] = probe_from(files, from);
    if (bad >= files.size()) break;
    fatal[bad] = why;
    from = bad + 1;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!fatal[i].empty()) errors_.push_back({files[i], fatal[i] + "; skipped"});
    else load_file_in_process(files[i]);
  }
}

bool PluginRegistry::load_file_in_process(const std::filesystem::path& file) {
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
