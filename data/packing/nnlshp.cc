#include <cmath>
#include <vector>

#include "common/status.h"
#include "data/packing/algorithms.h"
#include "data/packing/nnls.h"

namespace pbert::data {
namespace {

// Every multiset of at most `depth` lengths (each >= `min_length`) that sums
// to exactly `target`, longest first, appended to `out`.
void FullStrategies(int target, int min_length, int depth, std::vector<int>* prefix,
                    std::vector<std::vector<int>>* out) {
  if (depth == 0) return;
  for (int l = min_length; l <= target; ++l) {
    prefix->push_back(l);
    if (l == target) {
      out->emplace_back(prefix->rbegin(), prefix->rend());
    } else if (target - l >= l) {
      FullStrategies(target - l, l, depth - 1, prefix, out);
    }
    prefix->pop_back();
  }
}

// The paper's residual weights: short sequences are cheap padding, so
// missing them costs less.
constexpr int kCheapLength = 8;
constexpr double kCheapWeight = 0.09;

}  // namespace

absl::StatusOr<PackingPlan> PackNnlshp(const LengthHistogram& histogram,
                                       const PackingOptions& options) {
  const int S = options.max_len;
  std::vector<std::vector<int>> strategies;
  std::vector<int> prefix;
  FullStrategies(S, 1, std::min(options.max_depth, 3), &prefix, &strategies);

  auto weight = [](int length) { return length <= kCheapLength ? kCheapWeight : 1.0; };
  std::vector<SparseColumn> columns(strategies.size());
  for (size_t j = 0; j < strategies.size(); ++j) {
    for (int l : strategies[j]) {
      auto& entries = columns[j].entries;
      if (!entries.empty() && entries.back().first == l - 1) {
        entries.back().second += weight(l);
      } else {
        entries.push_back({l - 1, weight(l)});
      }
    }
  }
  std::vector<double> b(S);
  for (int l = 1; l <= S; ++l) {
    b[l - 1] = weight(l) * static_cast<double>(l <= histogram.max_len() ? histogram.counts[l] : 0);
  }
  ASSIGN_OR_RETURN(std::vector<double> x, SolveNnls(S, columns, b));

  StrategyCounter counter;
  for (size_t j = 0; j < strategies.size(); ++j) {
    counter.Add(strategies[j], static_cast<uint64_t>(std::llround(x[j])));
  }
  return RepairPlan(counter.ToPlan(S), histogram, options);
}

}  // namespace pbert::data
