#include "distributed/heartbeat.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace runner {
namespace {

constexpr auto kBeat = std::chrono::milliseconds(500);
const std::string kDone = "done";

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

double heartbeat_deadline_seconds() {
  const char* text = std::getenv("RUNNER_DIST_HEARTBEAT_S");
  if (text == nullptr || *text == '\0') return 10;
  const double seconds = std::atof(text);
  return seconds >= 0 ? seconds : 10;
}

Heartbeat::Heartbeat(const LaunchEnv& env, std::function<void(const std::string&)> on_silent_peer) {
  if (env.world_size < 2 || heartbeat_deadline_seconds() <= 0) return;
  thread_ = std::thread([this, env, fn = std::move(on_silent_peer)] { run(env, fn); });
}

Heartbeat::~Heartbeat() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::run(LaunchEnv env, std::function<void(const std::string&)> on_silent_peer) {
  const auto deadline = std::chrono::milliseconds(static_cast<long>(heartbeat_deadline_seconds() * 1000));
  const int peer = (env.rank + 1) % env.world_size;
  const std::string mine = "runner/heartbeat/" + std::to_string(env.rank);
  const std::string theirs = "runner/heartbeat/" + std::to_string(peer);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    // Its own connection: the run's client may be blocked in a long wait.
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.master_port);
    opts.isServer = false;
    opts.waitWorkers = false;
    opts.timeout = deadline;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    if (!env.store_prefix.empty()) store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store);
  } catch (const std::exception&) {
    return;  // the run's own rendezvous already succeeded; without a second connection, no heartbeat
  }
  std::string last_seen;
  bool watching = true;  // until the peer says it finished
  auto last_change = std::chrono::steady_clock::now();
  for (long beat = 0; !stop_; ++beat) {
    try {
      store->set(mine, bytes_of(std::to_string(beat)));
      if (watching && store->check({theirs})) {
        const auto value = store->get(theirs);
        const std::string seen(value.begin(), value.end());
        if (seen == kDone) watching = false;
        if (seen != last_seen) {
          last_seen = seen;
          last_change = std::chrono::steady_clock::now();
        }
      }
    } catch (const std::exception& e) {
      if (stop_) break;
      on_silent_peer("the rendezvous store at " + env.master_addr + ":" + std::to_string(env.master_port) +
                     " stopped answering (" + e.what() + "); its host rank or launcher is stopped or gone");
    }
    if (watching && std::chrono::steady_clock::now() - last_change > deadline)
      on_silent_peer("rank " + std::to_string(peer) + " stopped responding (no heartbeat for " +
                     std::to_string(deadline.count() / 1000) +
                     " s: stopped, frozen or its host is down; RUNNER_DIST_HEARTBEAT_S sets the limit)");
    for (auto slept = std::chrono::milliseconds(0); slept < kBeat && !stop_; slept += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  try {
    store->set(mine, bytes_of(kDone));
  } catch (const std::exception&) {
  }
}

}  // namespace runner
