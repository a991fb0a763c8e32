// The LP relaxation of bin packing with a depth limit (Gilmore-Gomory):
//   minimise sum_j x_j  s.t.  sum_j a_lj x_j >= n_l for every length l,
// over all strategies j (a_lj copies of length l, sum_l l a_lj <= S,
// sum_l a_lj <= D). Column generation keeps only the strategies the LP
// needs: the master LP is solved by Clp, and a strategy that improves it is
// one whose dual value sum_l pi_l a_lj exceeds 1, found by a knapsack with a
// cardinality limit. At the optimum, rounding down leaves at most
// (rows x D) sequences unplaced, which RepairPlan adds; the LP value is a
// lower bound for every plan, so the gap is known.
#include <ClpSimplex.hpp>
#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/packing/algorithms.h"

namespace pbert::data {
namespace {

constexpr double kImprovement = 1e-9;
constexpr int kMaxRounds = 5000;

// The best strategies under dual prices `price` (indexed by length): for each
// depth d <= D, the multiset of at most d lengths with length sum <= S and
// the largest total price.
class Pricer {
 public:
  Pricer(int max_len, int max_depth)
      : S_(max_len), D_(max_depth), value_((D_ + 1) * (S_ + 1)), choice_((D_ + 1) * (S_ + 1)) {}

  std::vector<std::pair<double, std::vector<int>>> Best(const std::vector<double>& price) {
    std::vector<int> useful;
    for (int l = 1; l <= S_; ++l) {
      if (price[l] > 1e-12) useful.push_back(l);
    }
    std::fill(value_.begin(), value_.begin() + S_ + 1, 0.0);
    for (int d = 1; d <= D_; ++d) {
      for (int c = 0; c <= S_; ++c) {
        double best = V(d - 1, c);
        int pick = 0;
        for (int l : useful) {
          if (l > c) break;
          double v = V(d - 1, c - l) + price[l];
          if (v > best) {
            best = v;
            pick = l;
          }
        }
        V(d, c) = best;
        C(d, c) = pick;
      }
    }
    std::vector<std::pair<double, std::vector<int>>> out;
    for (int d = 1; d <= D_; ++d) {
      if (V(d, S_) <= V(d - 1, S_) + kImprovement) continue;  // same as depth d-1
      std::vector<int> lengths;
      for (int k = d, c = S_; k > 0; --k) {
        int l = C(k, c);
        if (l == 0) continue;
        lengths.push_back(l);
        c -= l;
      }
      out.push_back({V(d, S_), lengths});
    }
    return out;
  }

 private:
  double& V(int d, int c) { return value_[d * (S_ + 1) + c]; }
  int& C(int d, int c) { return choice_[d * (S_ + 1) + c]; }

  int S_, D_;
  std::vector<double> value_;
  std::vector<int> choice_;
};

}  // namespace

absl::StatusOr<PackingPlan> PackLp(const LengthHistogram& histogram,
                                   const PackingOptions& options) {
  const int S = options.max_len;
  std::vector<int> row_of(S + 1, -1);
  std::vector<int> length_of_row;
  for (int l = 1; l <= histogram.max_len(); ++l) {
    if (histogram.counts[l] == 0) continue;
    row_of[l] = static_cast<int>(length_of_row.size());
    length_of_row.push_back(l);
  }
  const int rows = static_cast<int>(length_of_row.size());
  if (rows == 0) return PackingPlan{S, {}};

  ClpSimplex model;
  model.setLogLevel(0);
  model.resize(rows, 0);
  for (int r = 0; r < rows; ++r) {
    model.setRowLower(r, static_cast<double>(histogram.counts[length_of_row[r]]));
    model.setRowUpper(r, COIN_DBL_MAX);
  }
  std::vector<std::vector<int>> columns;
  std::set<std::vector<int>> known;
  auto add_columns = [&](const std::vector<std::vector<int>>& strategies) {
    std::vector<CoinBigIndex> starts{0};
    std::vector<int> indices;
    std::vector<double> elements;
    int added = 0;
    for (const std::vector<int>& s : strategies) {
      if (!known.insert(s).second) continue;
      for (size_t i = 0; i < s.size();) {
        size_t j = i;
        while (j < s.size() && s[j] == s[i]) ++j;
        indices.push_back(row_of[s[i]]);
        elements.push_back(static_cast<double>(j - i));
        i = j;
      }
      starts.push_back(static_cast<CoinBigIndex>(indices.size()));
      columns.push_back(s);
      ++added;
    }
    std::vector<double> lower(added, 0.0), upper(added, COIN_DBL_MAX), cost(added, 1.0);
    model.addColumns(added, lower.data(), upper.data(), cost.data(), starts.data(), indices.data(),
                     elements.data());
    return added;
  };
  // Start from a good feasible plan so the first LP is already close.
  std::vector<std::vector<int>> initial;
  for (const Strategy& s : PackLpfhp(histogram, options).strategies) initial.push_back(s.lengths);
  add_columns(initial);

  Pricer pricer(S, options.max_depth);
  std::vector<double> price(S + 1, 0.0);
  double best_price = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    if (round == 0 ? model.dual() : model.primal(0, 0); model.status() != 0) {
      return absl::InternalError(
          absl::StrCat("the packing LP failed (Clp status ", model.status(), ") in round ", round));
    }
    const double* duals = model.dualRowSolution();
    for (int r = 0; r < rows; ++r) price[length_of_row[r]] = std::max(0.0, duals[r]);
    auto best = pricer.Best(price);
    best_price = best.empty() ? 0.0 : best.back().first;
    std::vector<std::vector<int>> improving;
    for (auto& [value, lengths] : best) {
      if (value > 1.0 + kImprovement) improving.push_back(std::move(lengths));
    }
    if (improving.empty() || add_columns(improving) == 0) break;
  }
  // Farley's bound: with the best column pricing at p > 1, no plan uses
  // fewer than LP / p rows; at the optimum p <= 1 and this is the LP value.
  const double bound = model.objectiveValue() / std::max(1.0, best_price);

  const double* x = model.primalColumnSolution();
  StrategyCounter counter;
  for (size_t j = 0; j < columns.size(); ++j) {
    counter.Add(columns[j], static_cast<uint64_t>(std::floor(x[j] + 1e-9)));
  }
  PackingPlan plan = RepairPlan(counter.ToPlan(S), histogram, options);
  plan.proven_bound = bound;
  return plan;
}

}  // namespace pbert::data
