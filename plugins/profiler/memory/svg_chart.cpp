#include "svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

namespace plugins::memory_profiler {
namespace {

// Plot area inside the canvas; the left margin holds y tick labels and the axis title.
constexpr double kMarginLeft = 80, kMarginRight = 24, kMarginTop = 40, kMarginBottom = 56;
constexpr int kTargetTicks = 6;
// Colour-blind-safe band colours (Okabe-Ito), cycled in first-seen label order.
constexpr const char* kBandColours[] = {"#E69F00", "#56B4E9", "#009E73", "#F0E442",
                                        "#0072B2", "#D55E00", "#CC79A7", "#999999"};

std::string number(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

int decimals_for_step(double step) {
  return step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

void downsample_min_max(std::vector<double>& x, std::vector<double>& y, std::size_t max_points) {
  if (max_points < 2 || x.size() <= max_points) return;
  const std::size_t buckets = max_points / 2;
  std::vector<double> out_x, out_y;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = b * x.size() / buckets, end = (b + 1) * x.size() / buckets;
    if (begin == end) continue;
    std::size_t lo = begin, hi = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (y[i] < y[lo]) lo = i;
      if (y[i] > y[hi]) hi = i;
    }
    for (std::size_t i : {std::min(lo, hi), std::max(lo, hi)}) {
      out_x.push_back(x[i]);
      out_y.push_back(y[i]);
      if (lo == hi) break;
    }
  }
  x = std::move(out_x);
  y = std::move(out_y);
}

std::string render_svg(const LineChart& c) {
  if (c.x.size() != c.y.size()) throw std::invalid_argument("render_svg: x and y differ in length");
  const double plot_w = c.width - kMarginLeft - kMarginRight, plot_h = c.height - kMarginTop - kMarginBottom;
  double x_lo = c.x.empty() ? 0 : c.x.front(), x_hi = c.x.empty() ? 1 : c.x.back();
  if (!(x_hi > x_lo)) x_hi = x_lo + 1;
  double y_hi = 0;
  for (double v : c.y) y_hi = std::max(y_hi, v);
  y_hi = y_hi > 0 ? y_hi * 1.05 : 1;
  const auto px = [&](double v) { return kMarginLeft + (v - x_lo) / (x_hi - x_lo) * plot_w; };
  const auto py = [&](double v) { return kMarginTop + plot_h - v / y_hi * plot_h; };

  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << c.width << "\" height=\"" << c.height
    << "\" viewBox=\"0 0 " << c.width << " " << c.height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << c.width << "\" height=\"" << c.height << "\" fill=\"white\"/>\n"
    << "<text x=\"" << c.width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(c.title)
    << "</text>\n";

  // Bands first so the grid and the line stay visible on top.
  std::map<std::string, std::string> colour_of;
  std::vector<std::string> legend;
  for (const ChartBand& b : c.bands) {
    if (b.x_end <= x_lo || b.x_begin >= x_hi) continue;  // outside the plotted range (e.g. warm-up)
    if (!colour_of.count(b.label)) {
      colour_of[b.label] = kBandColours[legend.size() % std::size(kBandColours)];
      legend.push_back(b.label);
    }
    const double x0 = px(std::clamp(b.x_begin, x_lo, x_hi)), x1 = px(std::clamp(b.x_end, x_lo, x_hi));
    s << "<rect class=\"band\" x=\"" << number(x0, 2) << "\" y=\"" << kMarginTop << "\" width=\""
      << number(std::max(0.0, x1 - x0), 2) << "\" height=\"" << plot_h << "\" fill=\"" << colour_of[b.label]
      << "\" fill-opacity=\"0.22\"><title>" << xml_escape(b.label) << "</title></rect>\n";
  }

  const std::vector<double> y_ticks = nice_ticks(0, y_hi, kTargetTicks);
  const int y_decimals = y_ticks.size() > 1 ? decimals_for_step(y_ticks[1] - y_ticks[0]) : 2;
  for (double t : y_ticks) {
    s << "<line x1=\"" << kMarginLeft << "\" x2=\"" << kMarginLeft + plot_w << "\" y1=\"" << number(py(t), 2)
      << "\" y2=\"" << number(py(t), 2) << "\" stroke=\"#dddddd\"/>\n"
      << "<text x=\"" << kMarginLeft - 6 << "\" y=\"" << number(py(t) + 4, 2) << "\" text-anchor=\"end\">"
      << number(t, y_decimals) << "</text>\n";
  }
  const std::vector<double> x_ticks = nice_ticks(x_lo, x_hi, kTargetTicks);
  const int x_decimals = x_ticks.size() > 1 ? decimals_for_step(x_ticks[1] - x_ticks[0]) : 2;
  for (double t : x_ticks) {
    s << "<line x1=\"" << number(px(t), 2) << "\" x2=\"" << number(px(t), 2) << "\" y1=\"" << kMarginTop + plot_h
      << "\" y2=\"" << kMarginTop + plot_h + 5 << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << number(px(t), 2) << "\" y=\"" << kMarginTop + plot_h + 19 << "\" text-anchor=\"middle\">"
      << number(t, x_decimals) << "</text>\n";
  }
  s << "<rect x=\"" << kMarginLeft << "\" y=\"" << kMarginTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
    << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << kMarginLeft + plot_w / 2 << "\" y=\"" << c.height - 12 << "\" text-anchor=\"middle\">"
    << xml_escape(c.x_label) << "</text>\n"
    << "<text x=\"18\" y=\"" << kMarginTop + plot_h / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
    << kMarginTop + plot_h / 2 << ")\">" << xml_escape(c.y_label) << "</text>\n";

  s << "<polyline fill=\"none\" stroke=\"#1f3b73\" stroke-width=\"1.5\" points=\"";
  for (std::size_t i = 0; i < c.x.size(); ++i) s << (i ? " " : "") << number(px(c.x[i]), 2) << "," << number(py(c.y[i]), 2);
  s << "\"/>\n";

  if (!legend.empty())  // a backing so the legend stays readable over the line
    s << "<rect x=\"" << kMarginLeft + plot_w - 146 << "\" y=\"" << kMarginTop + 4 << "\" width=\"140\" height=\""
      << 18.0 * static_cast<double>(legend.size()) + 6 << "\" fill=\"white\" fill-opacity=\"0.8\"/>\n";
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double ly = kMarginTop + 8 + 18.0 * static_cast<double>(i), lx = kMarginLeft + plot_w - 140;
    s << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"12\" fill=\"" << colour_of[legend[i]]
      << "\" fill-opacity=\"0.5\"/>\n"
      << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 10 << "\">" << xml_escape(legend[i]) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace plugins::memory_profiler
