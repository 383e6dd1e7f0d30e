#include <stdexcept>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

#include "runner/context.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace runner {

Precision Precision::parse(const std::string& name) {
  Precision p;
  p.name = name;
  if (name == "fp32") return p;
  if (name == "tf32") {
    p.allow_tf32 = true;
    return p;
  }
  if (name == "bf16") {
    p.autocast = c10::ScalarType::BFloat16;
    return p;
  }
  if (name == "fp16") {
    p.autocast = c10::ScalarType::Half;
    return p;
  }
  throw std::runtime_error("unknown precision '" + name + "'; use fp32, tf32, bf16 or fp16");
}

AutocastScope::AutocastScope(const c10::Device& device, const Precision& precision)
    : device_type_(device.type()) {
  prev_tf32_ = at::globalContext().allowTF32CuBLAS();
  at::globalContext().setAllowTF32CuBLAS(precision.allow_tf32);
  if (!precision.autocast) return;
  enabled_ = true;
  prev_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, *precision.autocast);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (enabled_) {
    // Leaving the outermost autocast region drops its cache of casted weights,
    // as torch.autocast's __exit__ does.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
    at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
  }
  at::globalContext().setAllowTF32CuBLAS(prev_tf32_);
}

// Out of line: only this file needs the complete c10d::ProcessGroup.
Distributed::Distributed() = default;
Distributed::Distributed(const Distributed&) = default;
Distributed& Distributed::operator=(const Distributed&) = default;
Distributed::~Distributed() = default;

std::map<std::string, double> PluginFactory::facts(PluginKind kind, const Params& params) const {
  throw std::runtime_error(std::string(to_string(kind)) + " plugin '" + params.plugin_name() +
                           "': this plugin factory answers no facts");
}

std::map<std::string, double> Context::facts(PluginKind kind, const Params& params) const {
  if (plugins == nullptr)
    throw std::runtime_error("facts of " + std::string(to_string(kind)) + " plugin '" + params.plugin_name() +
                             "': this Context has no plugin factory (set Context::plugins)");
  return plugins->facts(kind, params);
}

std::filesystem::path Context::artifact_path(const std::string& file_name) const {
  std::filesystem::create_directories(artifact_dir);
  return artifact_dir / file_name;
}

void Context::synchronize() const {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) throw std::runtime_error(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(err));
  }
#endif
}

}  // namespace runner
