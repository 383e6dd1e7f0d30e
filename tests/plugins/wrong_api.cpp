// A plugin built against a future API: the host must not touch its manifest.
#include <cstdlib>

#include "runner/plugin.hpp"

RUNNER_PLUGIN_EXPORT int runner_plugin_api_version() { return runner::kPluginApiVersion + 41; }
RUNNER_PLUGIN_EXPORT const runner::PluginManifest* runner_plugin_manifest() { std::abort(); }
