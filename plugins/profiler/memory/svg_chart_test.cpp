#include <gtest/gtest.h>

#include <sstream>

#include "svg_chart.hpp"
#include "svg_check.hpp"

namespace plugins::memory_profiler {
namespace {

using testing::attribute_of;
using testing::count_of;
using testing::xml_problem;

LineChart five_points() {
  LineChart c;
  c.title = "Active memory";
  c.x_label = "time (ms)";
  c.y_label = "active memory (GiB)";
  c.x = {0, 1, 2, 3, 4};
  c.y = {0.5, 1.5, 2.5, 1.0, 0.25};
  return c;
}

TEST(SvgChart, IsWellFormedWithOnePolylineOfEveryPoint) {
  const std::string svg = render_svg(five_points());
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), 1u);
  std::istringstream points(attribute_of(svg, "polyline", "points"));
  std::string pair;
  int n = 0;
  while (points >> pair) {
    EXPECT_NE(pair.find(','), std::string::npos) << pair;
    ++n;
  }
  EXPECT_EQ(n, 5);
}

TEST(SvgChart, ShowsTitleAndBothAxisLabels) {
  const std::string svg = render_svg(five_points());
  EXPECT_NE(svg.find(">Active memory</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">active memory (GiB)</text>"), std::string::npos);
}

TEST(SvgChart, YAxisStartsAtZeroWithRoundTicks) {
  const std::string svg = render_svg(five_points());
  EXPECT_NE(svg.find(">0.0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">2.5</text>"), std::string::npos);
}

TEST(SvgChart, EscapesMarkupInText) {
  LineChart c = five_points();
  c.title = "a < b & \"c\"";
  const std::string svg = render_svg(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos);
}

TEST(SvgChart, BandsOfOneLabelShareAColourAndOneLegendEntry) {
  LineChart c = five_points();
  c.bands = {{0, 1, "forward"}, {1, 2, "backward"}, {2, 3, "forward"}};
  const std::string svg = render_svg(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "class=\"band\""), 3u);
  EXPECT_EQ(count_of(svg, ">forward</text>"), 1u);  // legend
  EXPECT_EQ(count_of(svg, ">backward</text>"), 1u);
  EXPECT_EQ(count_of(svg, "fill=\"#E69F00\" fill-opacity=\"0.22\""), 2u);  // both forward bands
}

TEST(SvgChart, EmptySeriesStillRenders) {
  LineChart c;
  c.title = "nothing";
  EXPECT_EQ(xml_problem(render_svg(c)), "");
}

TEST(SvgChart, MismatchedSeriesIsRejected) {
  LineChart c = five_points();
  c.y.pop_back();
  EXPECT_THROW(render_svg(c), std::invalid_argument);
}

TEST(NiceTicks, AreMultiplesOfOneTwoOrFive) {
  EXPECT_EQ(nice_ticks(0, 10.5, 6), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 0.9, 4), (std::vector<double>{0, 0.5}));
  EXPECT_EQ(nice_ticks(100, 160, 3), (std::vector<double>{100, 120, 140, 160}));
}

TEST(DownsampleMinMax, KeepsThePeakAndAtMostTheLimit) {
  std::vector<double> x, y;
  for (int i = 0; i < 10000; ++i) {
    x.push_back(i);
    y.push_back(i == 4321 ? 99.0 : (i % 7));
  }
  downsample_min_max(x, y, 100);
  EXPECT_LE(x.size(), 100u);
  EXPECT_EQ(*std::max_element(y.begin(), y.end()), 99.0);
  EXPECT_TRUE(std::is_sorted(x.begin(), x.end()));
}

TEST(DownsampleMinMax, LeavesShortSeriesAlone) {
  std::vector<double> x{1, 2, 3}, y{3, 1, 2};
  downsample_min_max(x, y, 100);
  EXPECT_EQ(y, (std::vector<double>{3, 1, 2}));
}

}  // namespace
}  // namespace plugins::memory_profiler
