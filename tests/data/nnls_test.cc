#include "data/packing/nnls.h"

#include <random>

#include "gtest/gtest.h"

namespace pbert::data {
namespace {

// The Karush-Kuhn-Tucker conditions prove a point optimal for this convex
// problem: x >= 0, gradient w = A^T (b - A x) <= 0 where x = 0 and = 0
// where x > 0.
void ExpectKkt(int rows, const std::vector<SparseColumn>& a, const std::vector<double>& b,
               const std::vector<double>& x, double tolerance) {
  std::vector<double> r = b;
  for (size_t j = 0; j < a.size(); ++j) {
    for (const auto& [row, v] : a[j].entries) r[row] -= v * x[j];
  }
  for (size_t j = 0; j < a.size(); ++j) {
    double w = 0;
    for (const auto& [row, v] : a[j].entries) w += v * r[row];
    ASSERT_GE(x[j], 0.0);
    if (x[j] > 0) {
      EXPECT_NEAR(w, 0.0, tolerance) << "column " << j;
    } else {
      EXPECT_LE(w, tolerance) << "column " << j;
    }
  }
  (void)rows;
}

TEST(NnlsTest, SolvesASmallSystemExactly) {
  // Columns e0+e1, e1, e2 with b = (1, 3, -1): best is x = (1, 2, 0), the
  // negative target of row 2 cannot be met.
  std::vector<SparseColumn> a = {{{{0, 1.0}, {1, 1.0}}}, {{{1, 1.0}}}, {{{2, 1.0}}}};
  auto x = SolveNnls(3, a, {1, 3, -1});
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], 1.0, 1e-12);
  EXPECT_NEAR((*x)[1], 2.0, 1e-12);
  EXPECT_EQ((*x)[2], 0.0);
}

TEST(NnlsTest, RandomSparseSystemsMeetKkt) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    int rows = 30, cols = 200;
    std::vector<SparseColumn> a(cols);
    std::uniform_int_distribution<int> row(0, rows - 1);
    std::uniform_real_distribution<double> value(-1.0, 2.0);
    for (auto& c : a) {
      std::vector<int> used;
      for (int k = 0; k < 3; ++k) {
        int r = row(rng);
        if (std::find(used.begin(), used.end(), r) != used.end()) continue;
        used.push_back(r);
        c.entries.push_back({r, value(rng)});
      }
      std::sort(c.entries.begin(), c.entries.end());
    }
    std::vector<double> b(rows);
    for (double& v : b) v = 100 * value(rng);
    auto x = SolveNnls(rows, a, b);
    ASSERT_TRUE(x.ok()) << x.status();
    ExpectKkt(rows, a, b, *x, 1e-6);
  }
}

}  // namespace
}  // namespace pbert::data
