// Non-negative least squares for tall-and-wide sparse systems, as NNLSHP
// needs: a few hundred rows, tens of thousands of columns with a handful of
// small entries each.
#pragma once

#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::data {

struct SparseColumn {
  std::vector<std::pair<int, double>> entries;  // (row, value), rows distinct
};

// argmin ||A x - b||_2 subject to x >= 0, by the Lawson-Hanson active-set
// method with an updated Cholesky factor of the passive columns' Gram matrix
// (so each step costs O(p^2) for p passive columns, not O(m p^2)).
absl::StatusOr<std::vector<double>> SolveNnls(int rows, const std::vector<SparseColumn>& columns,
                                              const std::vector<double>& b);

}  // namespace pbert::data
