// A plugin compiled with libstdc++'s old string ABI: its manifest's std::string
// members would be misread by the host, so the registry must refuse it before
// touching the manifest. Nothing here calls into runner_core (those symbols carry
// the new ABI and would not resolve).
#undef _GLIBCXX_USE_CXX11_ABI
#define _GLIBCXX_USE_CXX11_ABI 0
#include <cstdlib>

#include "runner/plugin.hpp"

namespace {
runner::PluginManifest make_manifest() { std::abort(); }
}  // namespace

RUNNER_PLUGIN(make_manifest)
