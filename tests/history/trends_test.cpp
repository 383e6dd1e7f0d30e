// The trends site's content (the browser test checks that it draws): runs told
// apart on the x axis, axes of times that stop at zero, constant metrics named
// rather than plotted, and smoke runs kept off the pages and the index's
// regression count.
#include <gtest/gtest.h>

#include "history/store.hpp"
#include "history/trends.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::env_json;
using testing::fresh_dir;
using testing::read_text;
using testing::record;
using testing::stored;

std::int64_t add_run(HistoryStore& store, const std::filesystem::path& dir, const std::vector<double>& samples,
                     bool smoke, const std::string& started) {
  const auto id = store.begin_run("demo", dir / started, env_json("Test CPU", "samecommit01"), smoke, started);
  store.add_point(id, stored({record(0, 1, samples, 4e6)}));
  store.finish_run(id, started);
  return id;
}

TEST(Trends, RunsAreToldApartTimesStopAtZeroConstantsAreNamedAndSmokeIsLeftOut) {
  const auto dir = fresh_dir("trends");
  HistoryStore store(dir / "h.sqlite");
  // Wide samples: the band and its padding would reach below zero.
  add_run(store, dir, {0.1, 5.0, 0.1, 5.0, 0.2, 4.0}, false, "2026-11-20T02:00:00Z");
  add_run(store, dir, {0.1, 5.0, 0.1, 5.0, 0.2, 4.0}, false, "2026-11-21T02:00:00Z");
  // A smoke run 100 times slower: it must not show as a regression.
  add_run(store, dir, std::vector<double>(6, 400.0), true, "2026-11-22T02:00:00Z");
  ASSERT_EQ(write_trends_site(store, RunFilter{}, dir / "site"), 1);
  const std::string page = read_text(dir / "site" / "demo.html");
  EXPECT_NE(page.find(">run 1 · 11-20 02:00<"), std::string::npos) << page;
  EXPECT_NE(page.find(">run 2 · 11-21 02:00<"), std::string::npos) << page;
  EXPECT_EQ(page.find(">samecommit<"), std::string::npos);
  EXPECT_EQ(page.find(">-"), std::string::npos) << "an axis label below zero";
  EXPECT_NE(page.find("Constant in every run (not plotted): peak_bytes = 4e+06 bytes."), std::string::npos) << page;
  EXPECT_EQ(page.find("aria-label=\"main · peak_bytes\""), std::string::npos);
  EXPECT_NE(page.find("aria-label=\"main · step_ms\""), std::string::npos) << page;
  EXPECT_EQ(page.find("class=\"regression\""), std::string::npos) << "the smoke run was plotted";
  const std::string index = read_text(dir / "site" / "index.html");
  EXPECT_NE(index.find("<td>2 (1 smoke left out)</td>"), std::string::npos) << index;
  EXPECT_EQ(index.find("class=\"bad\""), std::string::npos) << index;
}

}  // namespace
}  // namespace runner::history
