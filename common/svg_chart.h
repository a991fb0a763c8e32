// Line charts as SVG, for learning curves and throughput: several series per
// chart (each optionally with a shaded band, e.g. the spread over seeds),
// several charts in a grid in one file.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pbert {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in drawing order
  // Optional band around the line: low[i] and high[i] at points[i].x.
  std::vector<double> low, high;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;
};

// The charts in a grid of `columns` columns under a common `title`.
std::string ChartsSvg(const std::string& title, const std::vector<Chart>& charts, int columns);

}  // namespace pbert
