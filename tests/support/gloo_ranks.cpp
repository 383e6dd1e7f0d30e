#include "gloo_ranks.hpp"

#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace runner::testing {

void on_gloo_ranks(int world_size, const std::function<void(const Distributed& dist)>& body) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        c10::intrusive_ptr<c10d::Backend> gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
            c10::make_intrusive<c10d::PrefixStore>("gloo", store), rank, world_size, options);
        auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
        group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
        group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
        Distributed dist;
        dist.rank = rank;
        dist.local_rank = rank;
        dist.world_size = world_size;
        dist.backend = "gloo";
        dist.group = group;
        body(dist);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace runner::testing
