// What a plugin sees of the run: device, precision policy, seed, where to write,
// a logger, the measurement settings, a way to create other plugins, and (for
// multi-process runs) rank, world size and process group.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "runner/measure.hpp"
#include "runner/plugin.hpp"

namespace c10d { class ProcessGroup; }

namespace runner {

// fp32: plain float32 (tf32 off). tf32: float32 with TF32 matmuls.
// bf16 / fp16: float32 weights, autocast to that dtype (PyTorch's op lists).
struct Precision {
  std::string name = "fp32";
  std::optional<c10::ScalarType> autocast;
  bool allow_tf32 = false;
  static Precision parse(const std::string& name);  // throws on unknown names
};

// Enables the precision's autocast (and TF32 setting) for its lifetime.
class AutocastScope {
 public:
  AutocastScope(const c10::Device& device, const Precision& precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool enabled_ = false;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::Float;
  bool prev_tf32_ = false;
};

class Logger {
 public:
  virtual ~Logger();
  virtual void info(const std::string& line) = 0;
  virtual void warn(const std::string& line) = 0;
};

class PluginFactory {
 public:
  virtual ~PluginFactory();
  virtual std::unique_ptr<PluginBase> create(PluginKind kind, const Params& params,
                                             Context& ctx) const = 0;
  // The plugin's declared facts (PluginManifest::facts); throws when it declares none.
  virtual std::map<std::string, double> facts(PluginKind kind, const Params& params) const;
};

struct Distributed {
  int rank = 0;
  int world_size = 1;
  c10d::ProcessGroup* group = nullptr;  // null in single-process runs
};

class Context {
 public:
  c10::Device device{c10::kCPU};
  Precision precision;
  std::uint64_t seed = 0;
  std::filesystem::path run_dir;       // runs/<experiment>/<timestamp>
  std::filesystem::path artifact_dir;  // run_dir/artifacts/<part>-<point>, created on demand
  std::string point_name;              // "<part>-<index>", for artifact names
  MeasureSettings measure;
  // One summary per measure_steps call of this point (a task that measures in
  // another process adds its own); the host stores them with the records.
  std::vector<MeasureSummary> measurements;
  Logger* log = nullptr;
  const PluginFactory* plugins = nullptr;
  Distributed dist;

  bool is_cuda() const { return device.is_cuda(); }
  // Creates a nested plugin from its resolved options; throws if it is not a T.
  template <class T>
  std::unique_ptr<T> create(PluginKind kind, const Params& params) {
    if (plugins == nullptr)
      throw std::runtime_error("cannot create " + std::string(to_string(kind)) + " plugin '" + params.plugin_name() +
                               "': this Context has no plugin factory (set Context::plugins)");
    std::unique_ptr<PluginBase> base = plugins->create(kind, params, *this);
    T* typed = dynamic_cast<T*>(base.get());
    if (typed == nullptr) throw std::runtime_error("plugin '" + params.plugin_name() + "' is not a " + to_string(kind));
    base.release();
    return std::unique_ptr<T>(typed);
  }
  // What a plugin declares about itself from `params` alone (PluginManifest::facts),
  // e.g. a model's dimensions, so a task needs no other plugin's headers.
  std::map<std::string, double> facts(PluginKind kind, const Params& params) const;
  // Creates artifact_dir if needed and returns artifact_dir / file_name.
  std::filesystem::path artifact_path(const std::string& file_name) const;
  void synchronize() const;  // waits for the device (no-op on CPU)
};

}  // namespace runner
