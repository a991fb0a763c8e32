// A packing plan: which multisets of lengths ("strategies") fill the rows,
// and how many rows use each. Every algorithm produces one; the assignment of
// real sequences to rows (AssignSequences, pack_index.h) follows from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/config_field.h"
#include "data/histogram.h"

namespace pbert::data {

struct PackingOptions {
  int max_len = 512;  // S: tokens per row
  int max_depth = 8;  // D: most sequences in one row
  uint64_t seed = 0;  // for algorithms that draw (greedy's arrival order)

  // The config's packing key (max_len and seed are data's and run's).
  template <class V>
  void Visit(V& v) {
    v.Field("max_depth", &max_depth, "most sequences in one row (D)", config::InRange(1, 64));
  }
};

struct Strategy {
  std::vector<int> lengths;  // sorted longest first; sum <= max_len
  uint64_t count = 0;        // rows that use this strategy

  int tokens() const;
  int depth() const { return static_cast<int>(lengths.size()); }
};

struct PackingPlan {
  int max_len = 0;
  std::vector<Strategy> strategies;  // distinct, in a deterministic order
  // A proven lower bound on the rows of any plan with the same options, if
  // the algorithm found one (lp: its LP value); 0 otherwise.
  double proven_bound = 0;

  uint64_t rows() const;
  uint64_t sequences() const;
  uint64_t tokens() const;
  int depth_used() const;
  // The histogram of sequences this plan places.
  LengthHistogram Coverage() const;
};

// Collects rows by strategy, merging equal ones; yields a plan with
// strategies in a fixed order (lexicographic by lengths).
class StrategyCounter {
 public:
  // `lengths` in any order.
  void Add(std::vector<int> lengths, uint64_t count);
  PackingPlan ToPlan(int max_len) const;

 private:
  absl::flat_hash_map<std::vector<int>, uint64_t> counts_;
};

// OK iff `plan` places every sequence of `histogram` exactly once and every
// row fits in max_len tokens and max_depth sequences.
absl::Status CheckPlan(const PackingPlan& plan, const LengthHistogram& histogram,
                       const PackingOptions& options);

// Turns an approximate plan (from rounding an LP or least-squares solution)
// into an exact one: slots for sequences the histogram does not have are
// emptied, then sequences the plan misses are placed first-fit decreasing,
// into free space of existing rows first, then into new rows.
PackingPlan RepairPlan(const PackingPlan& approximate, const LengthHistogram& histogram,
                       const PackingOptions& options);

// First-fit decreasing over the histogram, exact (the same rows as placing
// one sequence at a time) in O(S * runs) instead of O(n log n). `open` are
// rows that already exist and may receive sequences, in first-fit order.
PackingPlan FirstFitDecreasing(const LengthHistogram& histogram, const PackingOptions& options,
                               const PackingPlan& open = {});

}  // namespace pbert::data
