// What a packing run achieved, as a table, JSON lines and an SVG plot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/histogram.h"
#include "data/packing/pack_index.h"
#include "data/packing/plan.h"

namespace pbert::data {

struct PackingReport {
  std::string algorithm;
  int max_len = 0;
  int max_depth = 0;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  uint64_t packs = 0;
  double efficiency = 0;      // tokens / (packs * max_len)
  double packing_factor = 0;  // sequences / packs: the speed-up over no packing
  int depth_used = 0;
  uint64_t strategies_used = 0;
  uint64_t lower_bound_packs = 0;  // ceil(tokens / max_len)
  uint64_t lp_bound_packs = 0;     // ceil(plan.proven_bound), 0 if none
  double theoretical_speedup = 0;  // sequences * max_len / tokens
  double seconds = 0;
};

struct PackingRun {
  PackingPlan plan;
  PackingReport report;
};

// Runs the algorithm `name` on `histogram`, times it and checks that its
// plan places every sequence exactly once within the limits.
absl::StatusOr<PackingRun> RunPacking(const std::string& name, const LengthHistogram& histogram,
                                      const PackingOptions& options);

// Packs the sequences whose lengths are `lengths` (sequence i has length
// lengths[i]) with algorithm `name`, then assigns them to rows (seeded by
// options.seed): the pack index the loader reads, and the run that made it.
struct PackedSequences {
  PackingRun run;
  PackIndex index;
};
absl::StatusOr<PackedSequences> PackLengths(const std::string& name,
                                            absl::Span<const uint16_t> lengths,
                                            const PackingOptions& options);

// One JSON object on one line; the keys are documented in docs/packing.md.
std::string ReportJson(const PackingReport& report);

// A fixed-width table with one row per report.
std::string ReportTable(const std::vector<PackingReport>& reports);

// An SVG with two panels: the length histogram, and how full the rows of
// `plan` are (rows per number of real tokens).
std::string PackingSvg(const LengthHistogram& histogram, const PackingPlan& plan,
                       const std::string& title);

}  // namespace pbert::data
