#include "common/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pbert {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr int kWidth = 460, kHeight = 300;  // one chart
constexpr int kLeft = 64, kRight = 16, kTop = 34, kBottom = 46;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// A "nice" tick step for the range [lo, hi].
double TickStep(double lo, double hi) {
  double span = hi - lo;
  if (!(span > 0)) return 1.0;
  double step = std::pow(10.0, std::floor(std::log10(span / 5)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (step * m) <= 6) return step * m;
  }
  return step * 10;
}

std::string Tick(double v) {
  double a = std::fabs(v);
  if (a >= 1e6) return absl::StrFormat("%.3gM", v / 1e6);
  if (a >= 1e4) return absl::StrFormat("%.3gk", v / 1e3);
  return absl::StrFormat("%.4g", v);
}

std::string OneChart(const Chart& chart, double ox, double oy) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const ChartSeries& s : chart.series) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      auto [x, y] = s.points[i];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min({y0, y, s.low.empty() ? y : s.low[i]});
      y1 = std::max({y1, y, s.high.empty() ? y : s.high[i]});
    }
  }
  std::string svg;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  absl::StrAppendFormat(&svg, "<g transform='translate(%.0f,%.0f)'>\n", ox, oy);
  absl::StrAppendFormat(&svg,
                        "<text x='%d' y='18' font-size='13' text-anchor='middle'>%s</text>\n",
                        kWidth / 2, Escape(chart.title));
  absl::StrAppendFormat(&svg,
                        "<rect x='%d' y='%d' width='%.0f' height='%.0f' fill='none' "
                        "stroke='#888'/>\n",
                        kLeft, kTop, pw, ph);
  if (!std::isfinite(x0)) {
    absl::StrAppendFormat(&svg, "<text x='%d' y='%d' font-size='12' text-anchor='middle'>no data</text>\n</g>\n",
                          kWidth / 2, kHeight / 2);
    return svg;
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const double pad = 0.04 * (y1 - y0);
  y0 -= pad;
  y1 += pad;
  auto X = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };
  for (int axis = 0; axis < 2; ++axis) {
    const double lo = axis == 0 ? x0 : y0, hi = axis == 0 ? x1 : y1;
    const double step = TickStep(lo, hi);
    for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) {
      if (axis == 0) {
        absl::StrAppendFormat(&svg,
                              "<line x1='%.1f' y1='%d' x2='%.1f' y2='%.1f' stroke='#eee'/>"
                              "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle'>%s</text>\n",
                              X(t), kTop, X(t), kTop + ph, X(t), kTop + ph + 14, Tick(t));
      } else {
        absl::StrAppendFormat(&svg,
                              "<line x1='%d' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>"
                              "<text x='%d' y='%.1f' font-size='10' text-anchor='end'>%s</text>\n",
                              kLeft, Y(t), kLeft + pw, Y(t), kLeft - 4, Y(t) + 3, Tick(t));
      }
    }
  }
  absl::StrAppendFormat(&svg,
                        "<text x='%.0f' y='%d' font-size='11' text-anchor='middle'>%s</text>\n",
                        kLeft + pw / 2, kHeight - 8, Escape(chart.x_label));
  absl::StrAppendFormat(&svg,
                        "<text x='14' y='%.0f' font-size='11' text-anchor='middle' "
                        "transform='rotate(-90 14 %.0f)'>%s</text>\n",
                        kTop + ph / 2, kTop + ph / 2, Escape(chart.y_label));
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const ChartSeries& s = chart.series[k];
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    if (!s.low.empty() && s.low.size() == s.points.size()) {
      std::string band;
      for (size_t i = 0; i < s.points.size(); ++i) {
        absl::StrAppendFormat(&band, "%.1f,%.1f ", X(s.points[i].first), Y(s.high[i]));
      }
      for (size_t i = s.points.size(); i-- > 0;) {
        absl::StrAppendFormat(&band, "%.1f,%.1f ", X(s.points[i].first), Y(s.low[i]));
      }
      absl::StrAppendFormat(&svg, "<polygon points='%s' fill='%s' fill-opacity='0.18'/>\n", band,
                            color);
    }
    std::string line;
    for (auto [x, y] : s.points) {
      if (std::isfinite(x) && std::isfinite(y)) absl::StrAppendFormat(&line, "%.1f,%.1f ", X(x), Y(y));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline points='%s' fill='none' stroke='%s' stroke-width='1.6'/>\n",
                          line, color);
    absl::StrAppendFormat(&svg,
                          "<rect x='%.0f' y='%d' width='10' height='3' fill='%s'/>"
                          "<text x='%.0f' y='%d' font-size='10'>%s</text>\n",
                          kLeft + 8.0, kTop + 10 + 13 * static_cast<int>(k), color, kLeft + 22.0,
                          kTop + 14 + 13 * static_cast<int>(k), Escape(s.name));
  }
  svg += "</g>\n";
  return svg;
}

}  // namespace

std::string ChartsSvg(const std::string& title, const std::vector<Chart>& charts, int columns) {
  columns = std::max(1, columns);
  const int rows = (static_cast<int>(charts.size()) + columns - 1) / columns;
  const int width = columns * kWidth, height = rows * kHeight + 36;
  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n"
      "<rect width='100%%' height='100%%' fill='white'/>\n"
      "<text x='%d' y='24' font-size='16' text-anchor='middle'>%s</text>\n",
      width, height, width / 2, Escape(title));
  for (size_t i = 0; i < charts.size(); ++i) {
    svg += OneChart(charts[i], static_cast<double>((i % columns) * kWidth),
                    36.0 + static_cast<double>((i / columns) * kHeight));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace pbert
