// A plugin whose manifest throws while loading: the host must skip it.
#include <stdexcept>

#include "runner/plugin.hpp"

namespace {
runner::PluginManifest make_manifest() { throw std::runtime_error("manifest exploded on purpose"); }
}  // namespace

RUNNER_PLUGIN(make_manifest)
