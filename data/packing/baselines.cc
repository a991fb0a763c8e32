// The baselines every better algorithm is measured against.
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "data/packing/algorithms.h"

namespace pbert::data {

PackingPlan PackNone(const LengthHistogram& histogram, const PackingOptions& options) {
  StrategyCounter counter;
  for (int l = 1; l <= histogram.max_len(); ++l) counter.Add({l}, histogram.counts[l]);
  return counter.ToPlan(options.max_len);
}

PackingPlan PackGreedy(const LengthHistogram& histogram, const PackingOptions& options) {
  std::vector<uint16_t> order;
  order.reserve(histogram.sequences());
  for (int l = 1; l <= histogram.max_len(); ++l) order.insert(order.end(), histogram.counts[l], l);
  std::mt19937_64 rng(options.seed);
  std::shuffle(order.begin(), order.end(), rng);

  // Rows are counted by their lengths in arrival order; StrategyCounter
  // sorts them once per distinct row rather than once per row.
  absl::flat_hash_map<std::vector<uint16_t>, uint64_t> rows;
  std::vector<uint16_t> row;
  int used = 0;
  for (uint16_t l : order) {
    if (used + l > options.max_len || static_cast<int>(row.size()) == options.max_depth) {
      ++rows[row];
      row.clear();
      used = 0;
    }
    row.push_back(l);
    used += l;
  }
  if (!row.empty()) ++rows[row];
  StrategyCounter counter;
  for (const auto& [lengths, count] : rows) {
    counter.Add(std::vector<int>(lengths.begin(), lengths.end()), count);
  }
  return counter.ToPlan(options.max_len);
}

PackingPlan PackFfd(const LengthHistogram& histogram, const PackingOptions& options) {
  return FirstFitDecreasing(histogram, options);
}

}  // namespace pbert::data
