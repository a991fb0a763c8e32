// The baselines every better algorithm is measured against.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "data/packing/algorithms.h"
#include "data/random.h"

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
  Rng(options.seed, 0).Shuffle(order);

  // Rows are counted by their sorted lengths packed into a short string
  // (two bytes a length), which stays within the small-string buffer for
  // typical depths: a hash lookup per row without an allocation.
  absl::flat_hash_map<std::string, uint64_t> rows;
  std::vector<uint16_t> row;
  std::string key;
  int used = 0;
  auto close_row = [&] {
    std::sort(row.begin(), row.end(), std::greater<uint16_t>());
    key.assign(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(uint16_t));
    ++rows[key];
    row.clear();
    used = 0;
  };
  for (uint16_t l : order) {
    if (used + l > options.max_len || static_cast<int>(row.size()) == options.max_depth) {
      close_row();
    }
    row.push_back(l);
    used += l;
  }
  if (!row.empty()) close_row();
  StrategyCounter counter;
  for (const auto& [packed, count] : rows) {
    const auto* lengths = reinterpret_cast<const uint16_t*>(packed.data());
    counter.Add(std::vector<int>(lengths, lengths + packed.size() / sizeof(uint16_t)), count);
  }
  return counter.ToPlan(options.max_len);
}

PackingPlan PackFfd(const LengthHistogram& histogram, const PackingOptions& options) {
  return FirstFitDecreasing(histogram, options);
}

}  // namespace pbert::data
