#include "data/packing/plan.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pbert::data {

int Strategy::tokens() const {
  int t = 0;
  for (int l : lengths) t += l;
  return t;
}

uint64_t PackingPlan::rows() const {
  uint64_t n = 0;
  for (const Strategy& s : strategies) n += s.count;
  return n;
}

uint64_t PackingPlan::sequences() const {
  uint64_t n = 0;
  for (const Strategy& s : strategies) n += s.count * s.lengths.size();
  return n;
}

uint64_t PackingPlan::tokens() const {
  uint64_t n = 0;
  for (const Strategy& s : strategies) n += s.count * static_cast<uint64_t>(s.tokens());
  return n;
}

int PackingPlan::depth_used() const {
  int d = 0;
  for (const Strategy& s : strategies) {
    if (s.count > 0) d = std::max(d, s.depth());
  }
  return d;
}

LengthHistogram PackingPlan::Coverage() const {
  LengthHistogram coverage(max_len);
  for (const Strategy& s : strategies) {
    for (int l : s.lengths) {
      if (l >= 1 && l <= max_len) coverage.counts[l] += s.count;
    }
  }
  return coverage;
}

void StrategyCounter::Add(std::vector<int> lengths, uint64_t count) {
  if (count == 0 || lengths.empty()) return;
  std::sort(lengths.begin(), lengths.end(), std::greater<int>());
  counts_[std::move(lengths)] += count;
}

PackingPlan StrategyCounter::ToPlan(int max_len) const {
  PackingPlan plan;
  plan.max_len = max_len;
  plan.strategies.reserve(counts_.size());
  for (const auto& [lengths, count] : counts_) plan.strategies.push_back({lengths, count});
  std::sort(plan.strategies.begin(), plan.strategies.end(),
            [](const Strategy& a, const Strategy& b) { return a.lengths < b.lengths; });
  return plan;
}

absl::Status CheckPlan(const PackingPlan& plan, const LengthHistogram& histogram,
                       const PackingOptions& options) {
  for (const Strategy& s : plan.strategies) {
    if (s.tokens() > options.max_len || s.depth() > options.max_depth || s.lengths.empty()) {
      return absl::InternalError(absl::StrCat("strategy [", absl::StrJoin(s.lengths, ","),
                                              "] does not fit ", options.max_len, " tokens and ",
                                              options.max_depth, " sequences"));
    }
    for (int l : s.lengths) {
      if (l < 1 || l > histogram.max_len()) {
        return absl::InternalError(absl::StrCat("strategy holds length ", l));
      }
    }
  }
  LengthHistogram coverage = plan.Coverage();
  for (int l = 1; l <= histogram.max_len(); ++l) {
    if (coverage.counts[l] != histogram.counts[l]) {
      return absl::InternalError(absl::StrCat("the plan places ", coverage.counts[l],
                                              " sequences of length ", l, ", the data has ",
                                              histogram.counts[l]));
    }
  }
  return absl::OkStatus();
}

PackingPlan FirstFitDecreasing(const LengthHistogram& histogram, const PackingOptions& options,
                               const PackingPlan& open) {
  // Rows in first-fit order, as runs of consecutive rows in the same state.
  // Identical sequences go one after another, so first fit fills a row with
  // as many as fit before it moves to the next: a run splits at most into
  // three, and the whole pass stays O(S * runs).
  struct Run {
    std::vector<int> lengths;
    int space;
    uint64_t count;
  };
  const int S = options.max_len;
  const int D = options.max_depth;
  std::vector<Run> runs;
  for (const Strategy& s : open.strategies) {
    if (s.count > 0) runs.push_back({s.lengths, S - s.tokens(), s.count});
  }
  for (int l = histogram.max_len(); l >= 1; --l) {
    uint64_t left = histogram.counts[l];
    for (size_t r = 0; r < runs.size() && left > 0; ++r) {
      int depth = static_cast<int>(runs[r].lengths.size());
      if (runs[r].space < l || depth >= D) continue;
      uint64_t per_row = std::min(runs[r].space / l, D - depth);
      uint64_t whole_rows = left / per_row;
      auto filled = [&](const Run& run, uint64_t k, uint64_t rows) {
        Run out = run;
        out.lengths.insert(out.lengths.end(), k, l);
        out.space -= static_cast<int>(k) * l;
        out.count = rows;
        return out;
      };
      if (whole_rows >= runs[r].count) {
        left -= runs[r].count * per_row;
        runs[r] = filled(runs[r], per_row, runs[r].count);
        continue;
      }
      std::vector<Run> parts;
      if (whole_rows > 0) parts.push_back(filled(runs[r], per_row, whole_rows));
      uint64_t rest = left - whole_rows * per_row;
      uint64_t untouched = runs[r].count - whole_rows;
      if (rest > 0) {
        parts.push_back(filled(runs[r], rest, 1));
        --untouched;
      }
      if (untouched > 0) parts.push_back(filled(runs[r], 0, untouched));
      runs.erase(runs.begin() + r);
      runs.insert(runs.begin() + r, parts.begin(), parts.end());
      left = 0;
    }
    if (left > 0) {
      uint64_t per_row = std::min(S / l, D);
      Run fresh{{}, S, 0};
      fresh.lengths.assign(per_row, l);
      fresh.space = S - static_cast<int>(per_row) * l;
      fresh.count = left / per_row;
      if (fresh.count > 0) runs.push_back(fresh);
      if (uint64_t rest = left % per_row; rest > 0) {
        runs.push_back({std::vector<int>(rest, l), S - static_cast<int>(rest) * l, 1});
      }
    }
  }
  StrategyCounter counter;
  for (const Run& run : runs) counter.Add(run.lengths, run.count);
  return counter.ToPlan(S);
}

PackingPlan RepairPlan(const PackingPlan& approximate, const LengthHistogram& histogram,
                       const PackingOptions& options) {
  const int S = options.max_len;
  LengthHistogram coverage = approximate.Coverage();
  std::vector<uint64_t> excess(S + 1, 0);
  LengthHistogram missing(S);
  for (int l = 1; l <= S; ++l) {
    if (coverage.counts[l] > histogram.counts[l])
      excess[l] = coverage.counts[l] - histogram.counts[l];
    if (coverage.counts[l] < histogram.counts[l])
      missing.counts[l] = histogram.counts[l] - coverage.counts[l];
  }
  // Empty the slots of sequences that do not exist: rows of a strategy lose
  // one sequence of length l each until the excess of l is gone. A pass can
  // leave excess behind when a split-off part still holds another excess
  // length, so passes repeat until none is left.
  PackingPlan emptied = approximate;
  auto has_excess = [&] {
    return std::any_of(excess.begin(), excess.end(), [](uint64_t e) { return e > 0; });
  };
  while (has_excess()) {
    StrategyCounter counter;
    for (const Strategy& s : emptied.strategies) {
      std::vector<int> lengths = s.lengths;
      uint64_t count = s.count;
      for (size_t i = 0; i < lengths.size() && count > 0;) {
        int l = lengths[i];
        if (excess[l] == 0) {
          ++i;
          continue;
        }
        uint64_t rows = std::min(count, excess[l]);
        excess[l] -= rows;
        std::vector<int> shorter = lengths;
        shorter.erase(shorter.begin() + i);
        if (rows == count) {
          lengths = std::move(shorter);  // all rows lose l; scan on in place
          continue;
        }
        counter.Add(std::move(shorter), rows);
        count -= rows;
        ++i;
      }
      counter.Add(lengths, count);
    }
    emptied = counter.ToPlan(S);
  }
  // Rows with the most free space first: the best chance for long leftovers.
  std::stable_sort(emptied.strategies.begin(), emptied.strategies.end(),
                   [](const Strategy& a, const Strategy& b) { return a.tokens() < b.tokens(); });
  return FirstFitDecreasing(missing, options, emptied);
}

}  // namespace pbert::data
