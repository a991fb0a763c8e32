#include "common/svg_chart.h"

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pbert {
namespace {

// The plot area of one chart in its own coordinates (common/svg_chart.cc).
constexpr double kPlotLeft = 64, kPlotRight = 444, kPlotTop = 34, kPlotBottom = 254;

// The top-left corners of the legend's colour swatches (the only 3 px tall
// rectangles in a chart).
std::vector<std::pair<double, double>> LegendSwatches(const std::string& svg) {
  std::vector<std::pair<double, double>> out;
  const std::regex swatch("<rect x='([0-9.]+)' y='([0-9.]+)' width='10' height='3'");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), swatch); it != std::sregex_iterator();
       ++it) {
    out.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  return out;
}

Chart Line(std::vector<std::pair<double, double>> points) {
  Chart chart{"t", "x", "y", {}};
  chart.series.push_back({"first run", points, {}, {}});
  chart.series.push_back({"second run", points, {}, {}});
  return chart;
}

TEST(SvgChartTest, LegendAvoidsAFallingLine) {
  // From the top left to the bottom right: the legend goes top right.
  std::vector<std::pair<double, double>> falling;
  for (int i = 0; i <= 20; ++i) falling.emplace_back(i, 20 - i);
  auto swatches = LegendSwatches(ChartsSvg("curves", {Line(falling)}, 1));
  ASSERT_EQ(swatches.size(), 2u);
  for (auto [x, y] : swatches) {
    EXPECT_GT(x, (kPlotLeft + kPlotRight) / 2);
    EXPECT_LT(y, (kPlotTop + kPlotBottom) / 2);
  }
  EXPECT_LT(swatches[0].second, swatches[1].second);  // in series order
}

TEST(SvgChartTest, LegendTopLeftAboveARisingLine) {
  std::vector<std::pair<double, double>> rising;
  for (int i = 0; i <= 20; ++i) rising.emplace_back(i, i);
  for (auto [x, y] : LegendSwatches(ChartsSvg("curves", {Line(rising)}, 1))) {
    EXPECT_LT(x, (kPlotLeft + kPlotRight) / 2);
    EXPECT_LT(y, (kPlotTop + kPlotBottom) / 2);
  }
}

TEST(SvgChartTest, LegendAvoidsBandsAndSparseSegments) {
  // Two points only: the segment between them crosses the bottom-left and
  // top-right corners, the band's top edge runs along the top; the bottom
  // right is the one corner nothing crosses.
  Chart chart{"t", "x", "y", {}};
  chart.series.push_back({"band", {{0, 5}, {10, 5}}, {4, 4}, {10, 10}});
  chart.series.push_back({"sparse", {{0, 0}, {10, 10}}, {}, {}});
  auto swatches = LegendSwatches(ChartsSvg("curves", {chart}, 1));
  ASSERT_EQ(swatches.size(), 2u);
  EXPECT_GT(swatches[0].first, (kPlotLeft + kPlotRight) / 2);
  EXPECT_GT(swatches[0].second, (kPlotTop + kPlotBottom) / 2);
}

TEST(SvgChartTest, EscapesNamesAndMarksEmptyCharts) {
  Chart empty{"a<b", "x", "y", {{"s", {}, {}, {}}}};
  Chart named{"t", "x", "y", {{"s&p", {{0, 0}, {1, 1}}, {}, {}}}};
  const std::string svg = ChartsSvg("t", {empty, named}, 2);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_NE(svg.find(">s&amp;p</text>"), std::string::npos);
  EXPECT_EQ(svg.find("s&p"), std::string::npos);
}

}  // namespace
}  // namespace pbert
