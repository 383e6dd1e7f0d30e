// A minimal SVG line chart (one series, optional shaded x-bands with a legend),
// enough for an active-memory timeline without a plotting library.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace plugins::memory_profiler {

struct ChartBand {
  double x_begin = 0, x_end = 0;
  std::string label;  // bands with one label share a colour and one legend entry
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<double> x, y;        // one point each; x non-decreasing
  std::vector<ChartBand> bands;    // drawn behind the line
  double width = 960, height = 480;  // pixels
};

// A complete standalone SVG document. Throws std::invalid_argument if x and y differ in length.
std::string render_svg(const LineChart& chart);

// Keeps at most max_points points (max_points >= 2): x is cut into buckets of
// consecutive points and each bucket keeps its minimum and maximum (in their
// order), so peaks and troughs survive the thinning.
void downsample_min_max(std::vector<double>& x, std::vector<double>& y, std::size_t max_points);

// Round tick values (steps 1, 2 or 5 x 10^k) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);

std::string xml_escape(const std::string& text);

}  // namespace plugins::memory_profiler
