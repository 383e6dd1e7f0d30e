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
  EXPECT_NE(page.find(">11-20 samecom<"), std::string::npos) << page;
  EXPECT_NE(page.find(">11-21 samecom<"), std::string::npos) << page;
  EXPECT_EQ(page.find(">-"), std::string::npos) << "an axis label below zero";
  EXPECT_NE(page.find("Constant in every run (not plotted): peak_bytes = 4e+06 bytes."), std::string::npos) << page;
  EXPECT_EQ(page.find("aria-label=\"main · peak_bytes\""), std::string::npos);
  EXPECT_NE(page.find("aria-label=\"main · step_ms\""), std::string::npos) << page;
  EXPECT_EQ(page.find("class=\"regression\""), std::string::npos) << "the smoke run was plotted";
  const std::string index = read_text(dir / "site" / "index.html");
  EXPECT_NE(index.find("<td>2 (1 smoke left out)</td>"), std::string::npos) << index;
  EXPECT_EQ(index.find("class=\"bad\""), std::string::npos) << index;
}

// Six runs at six commits of two points: size=128 gets 50 % slower from the
// fourth run on (a step), size=1024 has one slow run in the middle (a spike,
// which a run-against-previous compare marks twice). The page orders the
// charts by size as numbers, names the commit on the x axis, marks the step
// once and the spike not at all, and charts no derived rate.
TEST(Trends, StepsAreFoundOverTheSeriesChartsSortByNumberAndTicksNameTheCommit) {
  const auto dir = fresh_dir("trends-steps");
  HistoryStore store(dir / "h.sqlite");
  const double step[] = {1.0, 1.01, 0.99, 1.5, 1.51, 1.49}, spike[] = {2.0, 2.02, 2.6, 1.99, 2.01, 2.0};
  for (int run = 0; run < 6; ++run) {
    const std::string started = "2026-11-2" + std::to_string(run) + "T02:00:00Z";
    const std::string commit = "c0mm1" + std::to_string(run) + "aaaaaa";
    const auto id = store.begin_run("demo", dir / started, env_json("Test CPU", commit), false, started);
    for (int p = 0; p < 2; ++p) {
      const int size = p ? 128 : 1024;  // 1024 first: a text sort would keep it first
      nlohmann::json r = record(p, size, testing::around(p ? step[run] : spike[run]));
      r["metrics"]["tokens_per_s"] = {{"unit", "tokens/s"}, {"n", 12}, {"median", 1000.0 / run}, {"mean", 1.0},
                                      {"std", 1.0}, {"min", 1.0}, {"max", 2.0}};
      store.add_point(id, stored({r}));
    }
    store.finish_run(id, started);
  }
  ASSERT_EQ(write_trends_site(store, RunFilter{}, dir / "site"), 1);
  const std::string page = read_text(dir / "site" / "demo.html");
  const auto small = page.find("aria-label=\"size=128 · step_ms\"");
  const auto large = page.find("aria-label=\"size=1024 · step_ms\"");
  ASSERT_NE(small, std::string::npos) << page;
  ASSERT_NE(large, std::string::npos) << page;
  EXPECT_LT(small, large) << "size=128 must come before size=1024";
  EXPECT_NE(page.find(">11-20 c0mm10a<"), std::string::npos) << page;
  EXPECT_NE(page.find(">11-25 c0mm15a<"), std::string::npos) << page;
  size_t marks = 0;
  for (size_t at = 0; (at = page.find("class=\"regression\"", at)) != std::string::npos; ++at) ++marks;
  EXPECT_EQ(marks, 1u) << page;
  const auto mark = page.find("class=\"regression\"");
  EXPECT_GT(mark, small);
  EXPECT_LT(mark, large);
  EXPECT_NE(page.find("run 4, c0mm13aaaaaa", mark), std::string::npos) << page.substr(mark, 300);
  EXPECT_EQ(page.find("tokens_per_s\""), std::string::npos) << "a derived rate was charted";
  EXPECT_NE(page.find("Not charted (phases, rates derived from the step time; in each run's records): tokens_per_s."),
            std::string::npos) << page;
  // Filters: the part, and size with its values as numbers; each chart says
  // what it is filtered by (the browser test checks that choosing filters).
  EXPECT_NE(page.find("<select name=\"part\"><option value=\"\">all</option><option value=\"main\">main</option>"),
            std::string::npos) << page;
  EXPECT_NE(page.find("<select name=\"size\"><option value=\"\">any</option><option value=\"128\">128</option>"
                      "<option value=\"1024\">1024</option></select>"), std::string::npos) << page;
  EXPECT_EQ(page.find("<select name=\"device\""), std::string::npos) << "the device is not a filter";
  EXPECT_NE(page.find("<figure data-part=\"main\" data-params=\"{&quot;size&quot;:&quot;128&quot;}\">"
                      "<svg class=\"trend-plot\" role=\"img\" aria-label=\"size=128 · step_ms\""),
            std::string::npos) << page;
}

}  // namespace
}  // namespace runner::history
