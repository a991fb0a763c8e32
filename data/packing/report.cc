#include "data/packing/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "data/packing/algorithms.h"
#include "nlohmann/json.hpp"

namespace pbert::data {

std::string ReportJson(const PackingReport& r) {
  nlohmann::ordered_json j;
  j["version"] = kReportJsonVersion;
  j["algorithm"] = r.algorithm;
  j["max_len"] = r.max_len;
  j["max_depth"] = r.max_depth;
  j["sequences"] = r.sequences;
  j["tokens"] = r.tokens;
  j["rows"] = r.rows;
  j["efficiency"] = r.efficiency;
  j["packing_factor"] = r.packing_factor;
  j["depth_used"] = r.depth_used;
  j["strategies_used"] = r.strategies_used;
  j["lower_bound_rows"] = r.lower_bound_rows;
  if (r.lp_bound_rows > 0) j["lp_bound_rows"] = r.lp_bound_rows;
  j["theoretical_speedup"] = r.theoretical_speedup;
  j["seconds"] = r.seconds;
  return j.dump();
}

std::string ReportTable(const std::vector<PackingReport>& reports) {
  std::string out = absl::StrFormat("%-8s %5s %5s %12s %10s %10s %12s %11s %10s %10s\n", "algo",
                                    "depth", "used", "rows", "efficiency", "speed-up",
                                    "over bound", "over LP", "strategies", "seconds");
  for (const PackingReport& r : reports) {
    double over = r.lower_bound_rows == 0
                      ? 0.0
                      : 100.0 * (static_cast<double>(r.rows) / r.lower_bound_rows - 1.0);
    // Rows above the LP optimum: how far from the best possible plan at most.
    std::string over_lp = r.lp_bound_rows == 0 ? "-" : absl::StrCat(r.rows - r.lp_bound_rows);
    absl::StrAppendFormat(&out, "%-8s %5d %5d %12d %9.4f%% %10.5f %11.4f%% %11s %10d %10.3f\n",
                          r.algorithm, r.max_depth, r.depth_used, r.rows, 100.0 * r.efficiency,
                          r.packing_factor, over, over_lp, r.strategies_used, r.seconds);
  }
  if (!reports.empty()) {
    const PackingReport& r = reports.front();
    absl::StrAppendFormat(&out,
                          "%d sequences, %d tokens, max length %d: lower bound %d rows, "
                          "theoretical speed-up %.5f\n",
                          r.sequences, r.tokens, r.max_len, r.lower_bound_rows,
                          r.theoretical_speedup);
  }
  return out;
}

namespace {

// One bar panel: `values[i]` drawn as a bar at x = i on a log scale, since
// counts span six orders of magnitude (a spike of full-length sequences
// beside a long tail).
std::string BarPanel(const std::vector<double>& values, double left, double top, double width,
                     double height, const std::string& title, const std::string& x_label) {
  double peak = 0;
  for (double v : values) peak = std::max(peak, v);
  std::string svg = absl::StrFormat(
      "<text x='%.1f' y='%.1f' font-size='14' font-weight='bold'>%s</text>\n"
      "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#888'/>\n",
      left, top - 8, title, left, top, width, height);
  double bar = width / std::max<size_t>(1, values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] <= 0 || peak <= 0) continue;
    double h = height * std::log1p(values[i]) / std::log1p(peak);
    absl::StrAppendFormat(&svg,
                          "<rect x='%.2f' y='%.2f' width='%.2f' height='%.2f' fill='#3b6ea5'/>\n",
                          left + i * bar, top + height - h, std::max(bar, 0.5), h);
  }
  absl::StrAppendFormat(
      &svg,
      "<text x='%.1f' y='%.1f' font-size='11'>1</text>\n"
      "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%d</text>\n"
      "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%s</text>\n"
      "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>max %.0f (log scale)</text>\n",
      left, top + height + 14, left + width, top + height + 14, values.size(), left + width / 2,
      top + height + 14, x_label, left + width - 4, top + 14, peak);
  return svg;
}

}  // namespace

std::string PackingSvg(const LengthHistogram& histogram, const PackingPlan& plan,
                       const std::string& title) {
  const int S = plan.max_len;
  std::vector<double> lengths(histogram.counts.begin() + 1, histogram.counts.end());
  std::vector<double> fill(S, 0.0);
  for (const Strategy& s : plan.strategies) {
    if (s.tokens() >= 1) fill[s.tokens() - 1] += static_cast<double>(s.count);
  }
  std::string svg =
      "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='560' "
      "font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  absl::StrAppendFormat(
      &svg, "<text x='450' y='24' font-size='16' text-anchor='middle'>%s</text>\n", title);
  svg += BarPanel(lengths, 50, 60, 800, 180, "sequences per length", "sequence length");
  svg += BarPanel(fill, 50, 330, 800, 180, "rows per number of real tokens", "tokens in row");
  svg += "</svg>\n";
  return svg;
}

}  // namespace pbert::data
