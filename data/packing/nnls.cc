#include "data/packing/nnls.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pbert::data {
namespace {

double Dot(const SparseColumn& a, const std::vector<double>& dense) {
  double s = 0;
  for (const auto& [row, value] : a.entries) s += value * dense[row];
  return s;
}

// Upper-triangular R with G = R^T R for the passive columns' Gram matrix G,
// kept through column appends and deletions.
class GramFactor {
 public:
  explicit GramFactor(int capacity)
      : cap_(capacity), r_(static_cast<size_t>(capacity) * capacity) {}

  int size() const { return p_; }

  // Appends a column whose Gram entries against the current columns are `g`
  // and whose own squared norm is `gjj`. Returns false (and changes nothing)
  // if it is numerically dependent on them.
  bool Append(const std::vector<double>& g, double gjj) {
    if (p_ == cap_) return false;
    std::vector<double> col(p_);
    for (int i = 0; i < p_; ++i) {  // solve R^T col = g
      double s = g[i];
      for (int k = 0; k < i; ++k) s -= At(k, i) * col[k];
      col[i] = s / At(i, i);
    }
    double rest = gjj;
    for (double c : col) rest -= c * c;
    if (rest <= 1e-12 * gjj) return false;
    for (int i = 0; i < p_; ++i) At(i, p_) = col[i];
    At(p_, p_) = std::sqrt(rest);
    ++p_;
    return true;
  }

  // Deletes column k and restores the triangle with Givens rotations.
  void Delete(int k) {
    for (int j = k; j + 1 < p_; ++j) {
      for (int i = 0; i < p_; ++i) At(i, j) = At(i, j + 1);
    }
    --p_;
    for (int j = k; j < p_; ++j) {
      double a = At(j, j), b = At(j + 1, j);
      double h = std::hypot(a, b);
      if (h == 0) continue;
      double c = a / h, s = b / h;
      for (int col = j; col < p_; ++col) {
        double x = At(j, col), y = At(j + 1, col);
        At(j, col) = c * x + s * y;
        At(j + 1, col) = -s * x + c * y;
      }
    }
    for (int col = 0; col <= p_; ++col) At(p_, col) = 0;
  }

  // Solves G z = rhs.
  std::vector<double> Solve(const std::vector<double>& rhs) const {
    std::vector<double> y(p_);
    for (int i = 0; i < p_; ++i) {
      double s = rhs[i];
      for (int k = 0; k < i; ++k) s -= At(k, i) * y[k];
      y[i] = s / At(i, i);
    }
    for (int i = p_ - 1; i >= 0; --i) {
      double s = y[i];
      for (int k = i + 1; k < p_; ++k) s -= At(i, k) * y[k];
      y[i] = s / At(i, i);
    }
    return y;
  }

 private:
  double& At(int i, int j) { return r_[static_cast<size_t>(i) * cap_ + j]; }
  double At(int i, int j) const { return r_[static_cast<size_t>(i) * cap_ + j]; }

  int cap_;
  int p_ = 0;
  std::vector<double> r_;
};

}  // namespace

absl::StatusOr<std::vector<double>> SolveNnls(int rows, const std::vector<SparseColumn>& columns,
                                              const std::vector<double>& b) {
  const int n = static_cast<int>(columns.size());
  if (static_cast<int>(b.size()) != rows) {
    return absl::InvalidArgumentError("NNLS: right-hand side does not match the rows");
  }
  std::vector<double> x(n, 0.0);
  std::vector<int> passive;       // column ids, in factor order
  std::vector<char> state(n, 0);  // 1 passive, 2 dependent on the passive set
  GramFactor factor(rows);
  std::vector<double> scatter(rows, 0.0);
  std::vector<double> residual = b;
  double scale = 1.0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  const double tolerance = 1e-10 * scale;

  auto gram_row = [&](int j) {
    std::fill(scatter.begin(), scatter.end(), 0.0);
    for (const auto& [row, value] : columns[j].entries) scatter[row] = value;
    std::vector<double> g(passive.size());
    for (size_t i = 0; i < passive.size(); ++i) g[i] = Dot(columns[passive[i]], scatter);
    return std::make_pair(g, Dot(columns[j], scatter));
  };

  const int max_iterations = 3 * n + 10;
  for (int iteration = 0; iteration < max_iterations; ++iteration) {
    int best = -1;
    double best_gradient = tolerance;
    for (int j = 0; j < n; ++j) {
      if (state[j] != 0) continue;
      double w = Dot(columns[j], residual);
      if (w > best_gradient) {
        best_gradient = w;
        best = j;
      }
    }
    if (best < 0) return x;  // the KKT conditions hold
    auto [g, gjj] = gram_row(best);
    if (!factor.Append(g, gjj)) {
      state[best] = 2;
      continue;
    }
    passive.push_back(best);
    state[best] = 1;
    while (true) {
      std::vector<double> rhs(passive.size());
      for (size_t i = 0; i < passive.size(); ++i) rhs[i] = Dot(columns[passive[i]], b);
      std::vector<double> z = factor.Solve(rhs);
      double alpha = 1.0;
      for (size_t i = 0; i < passive.size(); ++i) {
        if (z[i] <= 0) {
          double xi = x[passive[i]];
          alpha = std::min(alpha, xi / (xi - z[i]));
        }
      }
      for (size_t i = 0; i < passive.size(); ++i) {
        x[passive[i]] += alpha * (z[i] - x[passive[i]]);
      }
      if (alpha >= 1.0) break;
      // Columns that reached zero leave; dependent columns may fit again.
      for (int i = static_cast<int>(passive.size()) - 1; i >= 0; --i) {
        if (x[passive[i]] <= 1e-12 * scale) {
          x[passive[i]] = 0;
          state[passive[i]] = 0;
          factor.Delete(i);
          passive.erase(passive.begin() + i);
        }
      }
      std::replace(state.begin(), state.end(), char{2}, char{0});
    }
    residual = b;
    for (int j : passive) {
      for (const auto& [row, value] : columns[j].entries) residual[row] -= value * x[j];
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("NNLS did not converge in ", max_iterations, " iterations"));
}

}  // namespace pbert::data
