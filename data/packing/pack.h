// Packing, from a config to rows: the packing section, and the pipeline
// that turns sequence lengths into a checked plan and a pack index (length
// histogram, algorithm, plan check, assignment of sequences to rows).
// docs/packing.md describes the algorithms.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/config_field.h"
#include "data/histogram.h"
#include "data/packing/algorithms.h"
#include "data/packing/pack_index.h"
#include "data/packing/plan.h"

namespace pbert::data {

// The config's packing section. options.max_len and options.seed come from
// the data and run sections.
struct PackingConfig {
  std::string algorithm = "lp";
  PackingOptions options;

  template <class V>
  void Visit(V& v) {
    v.Field("algorithm", &algorithm, JoinChoices(PackingAlgorithmNames()),
            config::OneOf(PackingAlgorithmNames()));
    v.Include(&options);
  }
};

struct PackingReport {
  std::string algorithm;
  int max_len = 0;
  int max_depth = 0;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  uint64_t rows = 0;
  double efficiency = 0;      // tokens / (rows * max_len)
  double packing_factor = 0;  // sequences / rows: the speed-up over no packing
  int depth_used = 0;
  uint64_t strategies_used = 0;
  uint64_t lower_bound_rows = 0;  // ceil(tokens / max_len)
  uint64_t lp_bound_rows = 0;     // ceil(plan.proven_bound), 0 if none
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

// The one driver of the pipeline: packs the sequences whose lengths are
// `lengths` (sequence i has length lengths[i]) with algorithm `name`, checks
// the plan, then assigns them to rows (seeded by options.seed): the pack
// index the loader reads, and the run that made it.
struct PackedSequences {
  PackingRun run;
  PackIndex index;
};
absl::StatusOr<PackedSequences> PackLengths(const std::string& name,
                                            absl::Span<const uint16_t> lengths,
                                            const PackingOptions& options);

}  // namespace pbert::data
