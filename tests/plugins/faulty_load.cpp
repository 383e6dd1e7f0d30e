// Plugins that take the process down while being loaded, each built with one
// FAULTY_LOAD_* definition into test_plugins/faulty/ (never on the normal test
// path): the host must probe them in a child and name the file, not die.
//   constructor_segfault  a static constructor dereferences null (at dlopen)
//   constructor_exit      a static constructor calls exit(3)
//   manifest_segfault     runner_plugin_manifest() crashes
//   constructor_hang      a static constructor never returns
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>

#include "runner/task.hpp"

namespace {

#if defined(FAULTY_LOAD_CONSTRUCTOR_SEGFAULT)
const int loaded = (std::raise(SIGSEGV), 0);
#elif defined(FAULTY_LOAD_CONSTRUCTOR_EXIT)
const int loaded = (std::exit(3), 0);
#elif defined(FAULTY_LOAD_CONSTRUCTOR_HANG)
const int loaded = [] {
  while (true) pause();
  return 0;
}();
#endif

runner::PluginManifest make_manifest() {
#if defined(FAULTY_LOAD_MANIFEST_SEGFAULT)
  std::raise(SIGSEGV);
#endif
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "faulty_load";
  m.version = "0";
  m.description = "never loads";
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> { return nullptr; };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
