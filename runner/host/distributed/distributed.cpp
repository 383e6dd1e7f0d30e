#include "distributed/distributed.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "base/stderr_line.hpp"
#include "config/experiment.hpp"
#include "config/registry.hpp"
#include "config/sweep.hpp"
#include "config/validate.hpp"
#include "distributed/heartbeat.hpp"
#include "output/point_guard.hpp"
#include "runner/device.hpp"

#ifdef RUNNER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace runner {

// distributed_nccl.cpp (CUDA builds with NCCL headers); nullptr elsewhere.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                   int world_size, std::chrono::milliseconds timeout);

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int env_int(const char* name, int min_value) {
  const char* text = env(name);
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == std::string(text).size() && v >= min_value) return v;
  } catch (const std::exception&) {
  }
  throw ConfigError(std::string("environment: ") + name + "='" + text + "' is not an integer >= " +
                    std::to_string(min_value));
}

int visible_gpus() {
#ifdef RUNNER_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) return n;
#endif
  return 0;
}

// Walks a task's resolved options and names every DDP plugin in use ("ddp=naive").
void find_ddp_plugins(const PluginRegistry& registry, const std::vector<OptionSpec>& options, const Params& params,
                      const std::string& path, std::vector<std::string>& found) {
  for (const OptionSpec& spec : options) {
    if (spec.type != OptionType::Plugin || !params.has(spec.name)) continue;
    const Params& nested = params.plugin(spec.name);
    const std::string where = path.empty() ? spec.name : path + "." + spec.name;
    if (nested.plugin_name() == "none") continue;
    if (spec.plugin_kind == PluginKind::Ddp) found.push_back(where + "=" + nested.plugin_name());
    if (const PluginManifest* m = registry.find(spec.plugin_kind, nested.plugin_name()))
      find_ddp_plugins(registry, m->options, nested, where, found);
  }
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string string_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

bool is_time_unit(const std::string& unit) { return unit == "ms" || unit == "s" || unit == "us"; }
bool is_memory_unit(const std::string& unit) {
  return unit == "bytes" || unit == "GiB" || unit == "MiB" || unit == "GB" || unit == "MB";
}
bool is_rate_unit(const std::string& unit) { return unit.size() > 2 && unit.substr(unit.size() - 2) == "/s"; }

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    entry += c;
  }
  const auto open = entry.find('[');
  if (open == std::string::npos) return entry;
  const std::string prefix = entry.substr(0, open);
  std::string first;
  for (size_t i = open + 1; i < entry.size() && entry[i] != '-' && entry[i] != ',' && entry[i] != ']'; ++i)
    first += entry[i];
  return prefix + first;
}

std::chrono::milliseconds collective_timeout() {
  if (!env("RUNNER_DIST_TIMEOUT_S")) return std::chrono::seconds(300);
  return std::chrono::seconds(env_int("RUNNER_DIST_TIMEOUT_S", 1));
}

int ranks_per_node(const LaunchEnv& e) {
  if (env("LOCAL_WORLD_SIZE")) return env_int("LOCAL_WORLD_SIZE", 1);
  if (const char* per_node = env("SLURM_NTASKS_PER_NODE")) {
    try {
      return std::max(1, std::stoi(per_node));  // "2" or "2(x3)"
    } catch (const std::exception&) {
    }
  }
  return e.local_rank + 1;
}

c10::Device use_local_gpu(int local_rank) {
  const int gpus = visible_gpus();
  if (local_rank >= gpus)
    throw ConfigError("local rank " + std::to_string(local_rank) + " has no GPU: " + std::to_string(gpus) +
                      " visible on this node (one rank per GPU)");
#ifdef RUNNER_WITH_CUDA
  cudaSetDevice(local_rank);
#endif
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

std::string checked_backend(const std::string& flag) {
  const std::string b = flag.empty() ? "auto" : flag;
  if (b != "auto" && b != "gloo" && b != "nccl")
    throw ConfigError("--backend: '" + b + "' is not one of auto, gloo, nccl (gloo for CPU tensors, nccl for CUDA)");
  return b;
}

std::optional<LaunchEnv> detect_launch_env() {
  LaunchEnv e;
  if (env("RANK") || env("WORLD_SIZE")) {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
      if (!env(name))
        throw ConfigError(std::string("environment: ") + name +
                          " is not set, but RANK/WORLD_SIZE are (start ranks with `runner launch` or torchrun)");
    e.rank = env_int("RANK", 0);
    e.world_size = env_int("WORLD_SIZE", 1);
    e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0) : e.rank;
    e.master_addr = env("MASTER_ADDR");
    e.master_port = env_int("MASTER_PORT", 1);
    e.node_rank = env("GROUP_RANK") ? env_int("GROUP_RANK", 0) : 0;
    e.nodes = env("GROUP_WORLD_SIZE") ? env_int("GROUP_WORLD_SIZE", 1) : 1;
    e.launcher = env("RUNNER_AGENT_STORE") ? "runner launch" : "torchrun";
    if (env("RUNNER_AGENT_STORE")) {
      e.agent_store = true;
    } else if (env("TORCHELASTIC_USE_AGENT_STORE") && std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True") {
      e.agent_store = true;
      e.store_prefix = std::string("/worker/attempt_") +
                       (env("TORCHELASTIC_RESTART_COUNT") ? env("TORCHELASTIC_RESTART_COUNT") : "0");
    }
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.rank = env_int("SLURM_PROCID", 0);
    e.world_size = env_int("SLURM_NTASKS", 1);
    e.local_rank = env("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0) : 0;
    e.node_rank = env("SLURM_NODEID") ? env_int("SLURM_NODEID", 0) : 0;
    e.nodes = env("SLURM_NNODES") ? env_int("SLURM_NNODES", 1) : 1;
    if (env("MASTER_ADDR")) e.master_addr = env("MASTER_ADDR");
    else if (env("SLURM_JOB_NODELIST")) e.master_addr = first_slurm_host(env("SLURM_JOB_NODELIST"));
    else if (env("SLURM_NODELIST")) e.master_addr = first_slurm_host(env("SLURM_NODELIST"));
    else throw ConfigError("environment: SLURM_JOB_NODELIST is not set; cannot find rank 0's host (set MASTER_ADDR)");
    e.master_port = env("MASTER_PORT") ? env_int("MASTER_PORT", 1)
                                       : 29500 + (env("SLURM_JOB_ID") ? env_int("SLURM_JOB_ID", 0) % 1000 : 0);
    e.launcher = "srun";
  } else {
    return std::nullopt;
  }
  if (e.rank >= e.world_size)
    throw ConfigError("environment: rank " + std::to_string(e.rank) + " is not below the world size " +
                      std::to_string(e.world_size) + " (" + e.launcher + ")");
  if (e.node_rank >= e.nodes)
    throw ConfigError("environment: node " + std::to_string(e.node_rank) + " is not below the node count " +
                      std::to_string(e.nodes) + " (" + e.launcher + ")");
  if (e.world_size == 1) return std::nullopt;
  return e;
}

void check_distributed_setup(const std::vector<Point>& points, const c10::Device& device, int world_size,
                             int ranks_per_node, const std::string& backend, const PluginRegistry& registry) {
  if (backend == "nccl" && !device.is_cuda())
    throw ConfigError("--backend nccl needs CUDA tensors; this run is on the CPU (use --backend gloo or --device cuda)");
  if (device.is_cuda() && world_size > 1) {
    const int gpus = visible_gpus();
    if (ranks_per_node > gpus)
      throw ConfigError(std::to_string(ranks_per_node) + " ranks per node but only " + std::to_string(gpus) +
                        " GPU(s) visible; one rank per GPU (lower --nproc-per-node or use --device cpu)");
  }
  if (world_size > 1) return;
  for (const Point& p : points) {
    const PluginManifest* task = registry.find(PluginKind::Task, p.task);
    if (task == nullptr) continue;
    std::vector<std::string> ddp;
    find_ddp_plugins(registry, task->options, p.params, "", ddp);
    if (!ddp.empty())
      throw ConfigError("part " + p.part + ": " + ddp.front() +
                        " needs 2 or more processes; start it with `runner launch --nproc-per-node 2 ...` "
                        "(or torchrun/srun), or set ddp: none");
  }
}

void check_processes_key(const ExperimentSpec& exp, int world_size) {
  if (!exp.has_processes) return;
  const int wanted = exp.processes;
  if (wanted < 1) throw ConfigError(exp.processes_where + ": processes: expected an integer >= 1");
  if (wanted > 1 && world_size == 1)
    throw ConfigError(exp.processes_where + ": processes: " + std::to_string(wanted) +
                      ": this experiment runs on " + std::to_string(wanted) + " ranks; start it with `runner launch " +
                      "--nproc-per-node " + std::to_string(wanted) + " " + exp.file.string() + "` (or torchrun/srun)");
}

DistributedSession::DistributedSession(const LaunchEnv& env, const c10::Device& device, const std::string& backend)
    : env_(env) {
  const auto timeout = collective_timeout();
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(env.master_port);
  opts.isServer = env.rank == 0 && !env.agent_store;
  opts.numWorkers = env.world_size;
  opts.waitWorkers = !env.agent_store;
  opts.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": rendezvous with " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " (" + env.launcher + ") failed: " + e.what());
  }
  store_ = tcp;
  if (!env.store_prefix.empty()) store_ = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, tcp);

  dist_.rank = env.rank;
  dist_.world_size = env.world_size;
  dist_.local_rank = env.local_rank;
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store_, env.rank, env.world_size);

  auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (env.launcher == "runner launch" && env.nodes == 1)  // one node: loopback needs no name resolution
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  c10::intrusive_ptr<c10d::Backend> gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("gloo", store_), env.rank, env.world_size, gloo_options);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  dist_.backend = "gloo";
  if (device.is_cuda()) {
    if (backend == "gloo") {
      group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
    } else {
      c10::intrusive_ptr<c10d::Backend> nccl = make_nccl_backend(
          c10::make_intrusive<c10d::PrefixStore>("nccl", store_), env.rank, env.world_size, timeout);
      if (!nccl) throw ConfigError("this runner was built without NCCL; use --backend gloo for CUDA tensors");
      group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      dist_.backend = "nccl";
    }
  }
  group->setDefaultBackend(dist_.backend == "nccl" ? c10d::ProcessGroup::BackendType::NCCL
                                                   : c10d::ProcessGroup::BackendType::GLOO);
  dist_.group = group;
  heartbeat_ = std::make_unique<Heartbeat>(env, [this](const std::string& why) {
    // The point in flight gets its error record (rank 0) and log line.
    const std::string who = "rank " + std::to_string(env_.rank) + ": ";
    if (!record_point_death(why)) write_stderr_line("runner: " + who + why);
    leave_error_note(env_.rank, who + why);
    // Aborting the communicator can wait for a collective that a CUDA graph launched: the
    // peer it waits on is gone, and no abort reaches a captured kernel. Exit regardless.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      std::_Exit(1);
    }).detach();
    abort();
    std::_Exit(1);
  });
}

DistributedSession::~DistributedSession() = default;

std::string DistributedSession::agree(const std::string& key, const std::string& value) {
  const std::string k = "runner/agree/" + key;
  if (env_.rank == 0) {
    store_->set(k, bytes_of(value));
    return value;
  }
  return string_of(store_->get(k));
}

nlohmann::json placement_of(const LaunchEnv& env) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {{"rank", env.rank},           {"local_rank", env.local_rank}, {"node_rank", env.node_rank},
          {"nodes", env.nodes},         {"world_size", env.world_size}, {"host", std::string(host)},
          {"pid", static_cast<long long>(getpid())}};
}

namespace {
std::vector<StoredRecord> placed(std::vector<StoredRecord> records, const LaunchEnv& env) {
  for (StoredRecord& r : records) r.observed["placement"] = placement_of(env);
  return records;
}
}  // namespace

void DistributedSession::send_records(int index, const std::vector<StoredRecord>& records) {
  nlohmann::json lines = nlohmann::json::array();
  for (const StoredRecord& r : placed(records, env_)) lines.push_back(encode_record(r));
  store_->set("runner/records/" + std::to_string(index) + "/" + std::to_string(env_.rank),
              bytes_of(lines.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

std::vector<std::vector<StoredRecord>> DistributedSession::gather_records(int index, std::vector<StoredRecord> own) {
  std::vector<std::vector<StoredRecord>> all;
  all.push_back(placed(std::move(own), env_));
  for (int r = 1; r < env_.world_size; ++r) {
    const std::string key = "runner/records/" + std::to_string(index) + "/" + std::to_string(r);
    try {
      store_->wait({key}, collective_timeout());
    } catch (const std::exception&) {
      throw std::runtime_error("rank 0: rank " + std::to_string(r) + " sent no records for point " +
                               std::to_string(index) + " within " +
                               std::to_string(collective_timeout().count() / 1000) + " s (did it die?)");
    }
    std::vector<StoredRecord> sent;
    for (const nlohmann::json& line : nlohmann::json::parse(string_of(store_->get(key)))) sent.push_back(decode_record(line));
    all.push_back(std::move(sent));
    store_->deleteKey(key);
  }
  return all;
}

void DistributedSession::abort() {
  try {
    if (dist_.group) dist_.group->abort();
  } catch (const std::exception&) {
    // Best effort: the process exits next anyway.
  }
}

namespace {

// The slowest rank's value of one field: the max of times and memory, the min of rates.
void keep_slowest(double& kept, double other, bool take_max) { kept = take_max ? std::max(kept, other) : std::min(kept, other); }

void merge_slowest(Metric& kept, const Metric& other) {
  const bool take_max = is_time_unit(kept.unit) || is_memory_unit(kept.unit);
  if (!take_max && !is_rate_unit(kept.unit)) return;
  if (auto* value = std::get_if<double>(&kept.value)) {
    if (const auto* theirs = std::get_if<double>(&other.value)) keep_slowest(*value, *theirs, take_max);
  } else if (auto* stats = std::get_if<Stats>(&kept.value)) {
    if (const auto* theirs = std::get_if<Stats>(&other.value)) {
      keep_slowest(stats->mean, theirs->mean, take_max);
      keep_slowest(stats->median, theirs->median, take_max);
      keep_slowest(stats->min, theirs->min, take_max);
      keep_slowest(stats->max, theirs->max, take_max);
    }
  }
}

}  // namespace

std::vector<StoredRecord> merge_rank_records(const std::vector<std::vector<StoredRecord>>& per_rank) {
  std::vector<StoredRecord> out;
  size_t common = std::numeric_limits<size_t>::max();
  for (size_t r = 0; r < per_rank.size(); ++r) {
    common = std::min(common, per_rank[r].size());
    for (StoredRecord record : per_rank[r]) {
      record.labels["rank"] = std::to_string(r);
      out.push_back(std::move(record));
    }
  }
  for (size_t i = 0; i < common; ++i) {
    StoredRecord agg = per_rank[0][i];
    for (size_t r = 0; r < per_rank.size(); ++r) {
      const StoredRecord& theirs = per_rank[r][i];
      if (theirs.failed() && !agg.failed()) {
        agg.status = theirs.status;
        agg.unknown_status = theirs.unknown_status;
        agg.message = "rank " + std::to_string(r) + ": " + theirs.message;
      }
      if (r == 0) continue;
      for (auto& [name, metric] : agg.metrics)
        if (const Metric* other = theirs.metric(name)) merge_slowest(metric, *other);
    }
    agg.labels.erase("rank");
    agg.observed.erase("placement");
    agg.observed["ranks"] = per_rank.size();
    out.push_back(std::move(agg));
  }
  return out;
}

void leave_error_note(int rank, const std::string& message) {
  const char* dir = std::getenv("RUNNER_LAUNCH_ERROR_DIR");
  if (dir == nullptr) return;
  std::ofstream(std::string(dir) + "/rank" + std::to_string(rank) + ".txt") << message << "\n";
}

}  // namespace runner
