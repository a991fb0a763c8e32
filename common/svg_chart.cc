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
    // Counted, not accumulated: where the values are large and the range
    // narrow, t + step can round back to t.
    const double first = std::ceil(lo / step);
    for (int k = 0; k <= 12; ++k) {
      const double t = (first + k) * step;
      if (!(t <= hi + 1e-9 * step)) break;
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
  }
  // The legend goes in the corner of the plot that the lines and bands cross
  // least (top left on a tie), so that it hides as little data as possible.
  size_t longest = 0;
  for (const ChartSeries& s : chart.series) longest = std::max(longest, s.name.size());
  const double lw = 30 + 5.6 * static_cast<double>(longest);
  const double lh = 8 + 13.0 * static_cast<double>(chart.series.size());
  double best_x = kLeft + 4, best_y = kTop + 2;
  size_t best_hits = std::numeric_limits<size_t>::max();
  for (int corner = 0; corner < 4; ++corner) {
    const double bx = corner % 2 == 0 ? kLeft + 4 : kLeft + pw - 4 - lw;
    const double by = corner < 2 ? kTop + 2 : kTop + ph - 2 - lh;
    size_t hits = 0;
    // Points along each segment of the lines and band edges, in pixels.
    auto count = [&](double xa, double ya, double xb, double yb) {
      if (!std::isfinite(xa) || !std::isfinite(ya) || !std::isfinite(xb) || !std::isfinite(yb)) {
        return;
      }
      for (int j = 0; j <= 8; ++j) {
        const double px = X(xa + (xb - xa) * j / 8), py = Y(ya + (yb - ya) * j / 8);
        if (px >= bx && px <= bx + lw && py >= by && py <= by + lh) ++hits;
      }
    };
    for (const ChartSeries& s : chart.series) {
      const bool band = s.low.size() == s.points.size() && s.high.size() == s.points.size();
      for (size_t i = 0; i < s.points.size(); ++i) {
        const size_t h = i == 0 ? 0 : i - 1;
        const auto [xa, ya] = s.points[h];
        const auto [xb, yb] = s.points[i];
        count(xa, ya, xb, yb);
        if (band) {
          count(xa, s.low[h], xb, s.low[i]);
          count(xa, s.high[h], xb, s.high[i]);
        }
      }
    }
    if (hits < best_hits) {
      best_hits = hits;
      best_x = bx;
      best_y = by;
    }
  }
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    const double row = best_y + 4 + 13.0 * static_cast<double>(k);
    absl::StrAppendFormat(&svg,
                          "<rect x='%.0f' y='%.0f' width='10' height='3' fill='%s'/>"
                          "<text x='%.0f' y='%.0f' font-size='10'>%s</text>\n",
                          best_x + 4, row + 6, color, best_x + 18, row + 10,
                          Escape(chart.series[k].name));
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
