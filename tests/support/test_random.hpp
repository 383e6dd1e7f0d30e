// What randomized numeric tests share: a fresh seed, printed so a failure can be replayed,
// and the relative error ||a - b|| / ||b|| in fp64 on the CPU.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <torch/torch.h>

namespace test_support {

inline std::uint64_t fresh_seed() {
  const auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000003);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

inline double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble).cpu(), bd = b.to(torch::kDouble).cpu();
  return (ad - bd).norm().item<double>() / bd.norm().item<double>();
}

}  // namespace test_support
