// Reads [{"a": [...], "b": [...]}, ...] on stdin, writes [{"u", "p", "exact"}, ...]:
// the U test of runner_history, for utest_vs_scipy.py.
#include <iostream>

#include <nlohmann/json.hpp>

#include "history/mann_whitney.hpp"

int main() {
  const nlohmann::json cases = nlohmann::json::parse(std::cin);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    const auto r = runner::history::mann_whitney_u(c["a"].get<std::vector<double>>(), c["b"].get<std::vector<double>>());
    out.push_back({{"u", r.u}, {"p", r.p_value}, {"exact", r.exact}});
  }
  std::cout << out.dump() << "\n";
}
