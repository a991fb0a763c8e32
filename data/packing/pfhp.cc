// The two histogram-packing heuristics of the paper's authors. Open rows are
// kept by free space; each entry is a group of identical rows, so the work is
// O(S^2) whatever the number of sequences. Entries leave the open set when
// they are full or at max depth. Within one free-space bucket the most
// recently added group is taken first, which the published numbers depend on.
#include <algorithm>
#include <vector>

#include "data/packing/algorithms.h"

namespace pbert::data {
namespace {

struct Group {
  uint64_t count;
  std::vector<int> lengths;
};

class OpenRows {
 public:
  OpenRows(int max_len, int max_depth) : buckets_(max_len + 1), max_depth_(max_depth) {}

  // Files rows with `space` tokens left as open or, if they can take no more,
  // as finished.
  void Add(Group group, int space) {
    if (group.count == 0) return;
    if (space == 0 || static_cast<int>(group.lengths.size()) >= max_depth_) {
      finished_.Add(std::move(group.lengths), group.count);
    } else {
      buckets_[space].push_back(std::move(group));
    }
  }
  std::vector<Group>& bucket(int space) { return buckets_[space]; }

  PackingPlan Finish(int max_len) {
    for (auto& bucket : buckets_) {
      for (Group& g : bucket) finished_.Add(std::move(g.lengths), g.count);
    }
    return finished_.ToPlan(max_len);
  }

 private:
  std::vector<std::vector<Group>> buckets_;
  int max_depth_;
  StrategyCounter finished_;
};

}  // namespace

PackingPlan PackSpfhp(const LengthHistogram& histogram, const PackingOptions& options) {
  const int S = options.max_len;
  OpenRows open(S, options.max_depth);
  for (int l = histogram.max_len(); l >= 1; --l) {
    uint64_t left = histogram.counts[l];
    // Worst fit: the row with the most space first, down to an exact fit.
    for (int space = S; space >= l && left > 0;) {
      std::vector<Group>& bucket = open.bucket(space);
      if (bucket.empty()) {
        --space;
        continue;
      }
      Group group = std::move(bucket.back());
      bucket.pop_back();
      uint64_t rows = std::min(group.count, left);
      if (group.count > rows) bucket.push_back({group.count - rows, group.lengths});
      left -= rows;
      group.lengths.push_back(l);
      group.count = rows;
      open.Add(std::move(group), space - l);
    }
    if (left > 0) open.Add({left, {l}}, S - l);
  }
  return open.Finish(S);
}

PackingPlan PackLpfhp(const LengthHistogram& histogram, const PackingOptions& options) {
  const int S = options.max_len;
  const int D = options.max_depth;
  OpenRows open(S, D);
  for (int l = histogram.max_len(); l >= 1; --l) {
    uint64_t left = histogram.counts[l];
    // Best fit: the row with the least space that still takes l; after each
    // fill the search starts again from the best fit.
    int space = l;
    while (left > 0) {
      if (space > S) {
        // Fits nowhere: new rows with as many copies as fit.
        uint64_t copies =
            std::min<uint64_t>({static_cast<uint64_t>(S / l), static_cast<uint64_t>(D), left});
        open.Add({left / copies, std::vector<int>(copies, l)}, S - static_cast<int>(copies) * l);
        left -= left / copies * copies;
        continue;
      }
      std::vector<Group>& bucket = open.bucket(space);
      if (bucket.empty()) {
        ++space;
        continue;
      }
      Group group = std::move(bucket.back());
      bucket.pop_back();
      uint64_t copies = std::min<uint64_t>({static_cast<uint64_t>(space / l),
                                            static_cast<uint64_t>(D) - group.lengths.size(), left});
      uint64_t rows = std::min(group.count, left / copies);
      if (group.count > rows) bucket.push_back({group.count - rows, group.lengths});
      left -= rows * copies;
      group.lengths.insert(group.lengths.end(), copies, l);
      group.count = rows;
      open.Add(std::move(group), space - static_cast<int>(copies) * l);
      space = l;
    }
  }
  return open.Finish(S);
}

}  // namespace pbert::data
