#include "data/packing/pack.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pbert::data {

absl::StatusOr<PackingRun> RunPacking(const std::string& name, const LengthHistogram& histogram,
                                      const PackingOptions& options) {
  ASSIGN_OR_RETURN(const PackingAlgorithm* algorithm, FindPackingAlgorithm(name));
  if (histogram.max_len() > options.max_len) {
    return absl::InvalidArgumentError(absl::StrCat("the histogram has lengths up to ",
                                                   histogram.max_len(), ", above max_len ",
                                                   options.max_len));
  }
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(PackingPlan plan, algorithm->pack(histogram, options));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RETURN_IF_ERROR(Annotate(CheckPlan(plan, histogram, options),
                           absl::StrCat("packing algorithm ", name, " produced a bad plan")));
  PackingReport r;
  r.algorithm = name;
  r.max_len = options.max_len;
  r.max_depth = options.max_depth;
  r.sequences = plan.sequences();
  r.tokens = plan.tokens();
  r.rows = plan.rows();
  r.efficiency = r.rows == 0 ? 0.0
                              : static_cast<double>(r.tokens) /
                                    (static_cast<double>(r.rows) * options.max_len);
  r.packing_factor = r.rows == 0 ? 0.0 : static_cast<double>(r.sequences) / r.rows;
  r.depth_used = plan.depth_used();
  for (const Strategy& s : plan.strategies) r.strategies_used += s.count > 0;
  r.lower_bound_rows = histogram.LowerBoundRows();
  if (plan.proven_bound > 0) {
    r.lp_bound_rows = static_cast<uint64_t>(std::ceil(plan.proven_bound - 1e-6));
  }
  r.theoretical_speedup = histogram.TheoreticalSpeedup();
  r.seconds = seconds;
  return PackingRun{std::move(plan), r};
}

absl::StatusOr<PackedSequences> PackLengths(const std::string& name,
                                            absl::Span<const uint16_t> lengths,
                                            const PackingOptions& options) {
  ASSIGN_OR_RETURN(LengthHistogram histogram, HistogramOf(lengths, options.max_len));
  ASSIGN_OR_RETURN(PackingRun run, RunPacking(name, histogram, options));
  ASSIGN_OR_RETURN(PackIndex index, AssignSequences(run.plan, lengths, options.seed));
  return PackedSequences{std::move(run), std::move(index)};
}

}  // namespace pbert::data
