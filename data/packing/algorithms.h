// The packing algorithms, all working on a length histogram. See
// docs/packing.md for what each does and how they compare.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/histogram.h"
#include "data/packing/plan.h"

namespace pbert::data {

// One sequence per row: the unpacked baseline.
PackingPlan PackNone(const LengthHistogram& histogram, const PackingOptions& options);

// Concatenation in arrival order (a seeded shuffle of the histogram) until
// the next sequence does not fit, as GPT/T5-style pipelines do without
// splitting sequences.
PackingPlan PackGreedy(const LengthHistogram& histogram, const PackingOptions& options);

// First-fit decreasing (exact, computed on the histogram).
PackingPlan PackFfd(const LengthHistogram& histogram, const PackingOptions& options);

// Shortest-pack-first histogram packing (the paper's 3.1.1): longest
// lengths first, each into the open row with the most space left.
PackingPlan PackSpfhp(const LengthHistogram& histogram, const PackingOptions& options);

// Longest-pack-first histogram packing: each length into the open row it
// fills best, several copies at once when they fit.
PackingPlan PackLpfhp(const LengthHistogram& histogram, const PackingOptions& options);

// Non-negative least squares histogram packing (the paper's 3.1.2): all
// strategies of depth <= min(D, 3) that fill a row exactly, weighted NNLS
// for their counts, rounding, then RepairPlan.
absl::StatusOr<PackingPlan> PackNnlshp(const LengthHistogram& histogram,
                                       const PackingOptions& options);

// Linear programming over all strategies of depth <= D by column generation
// (COIN-OR Clp for the master LP, a knapsack for pricing), then rounding
// down and RepairPlan. The plan's proven_bound is the LP value: no plan with
// these options uses fewer rows.
absl::StatusOr<PackingPlan> PackLp(const LengthHistogram& histogram,
                                   const PackingOptions& options);

struct PackingAlgorithm {
  const char* name;
  const char* summary;
  absl::StatusOr<PackingPlan> (*pack)(const LengthHistogram&, const PackingOptions&);
};

// Every algorithm, from the baselines to the best.
absl::Span<const PackingAlgorithm> PackingAlgorithms();

absl::StatusOr<const PackingAlgorithm*> FindPackingAlgorithm(absl::string_view name);

// The algorithms' names, in PackingAlgorithms() order.
std::vector<std::string> PackingAlgorithmNames();

}  // namespace pbert::data
