// A plugin that says it was built against another LibTorch: the registry must
// skip it with the reason and never call its manifest.
#include <cstdlib>

#include <torch/version.h>
#undef TORCH_VERSION
#define TORCH_VERSION "1.13.1"
#include "runner/plugin.hpp"

namespace {
runner::PluginManifest make_manifest() { std::abort(); }
}  // namespace

RUNNER_PLUGIN(make_manifest)
