// What a packing run achieved (data/packing/pack.h), as a table, JSON lines
// and an SVG plot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/histogram.h"
#include "data/packing/pack.h"
#include "data/packing/plan.h"

namespace pbert::data {

// Version of ReportJson's keys (docs/packing.md). 2: `rows`,
// `lower_bound_rows` and `lp_bound_rows`, which version 1 (no `version` key)
// called `packs`, `lower_bound_packs` and `lp_bound_packs`.
inline constexpr int kReportJsonVersion = 2;

// One JSON object on one line; the keys are documented in docs/packing.md.
std::string ReportJson(const PackingReport& report);

// A fixed-width table with one row per report.
std::string ReportTable(const std::vector<PackingReport>& reports);

// An SVG with two panels: the length histogram, and how full the rows of
// `plan` are (rows per number of real tokens).
std::string PackingSvg(const LengthHistogram& histogram, const PackingPlan& plan,
                       const std::string& title);

}  // namespace pbert::data
