// Two trainees that took the same step another way (accumulated, padded,
// on another device): their gradients within a bound, and their weights
// within what LAMB makes of it.
#pragma once

#include <string>

#include "gtest/gtest.h"
#include "model/bert.h"
#include "optim/lamb.h"

namespace pbert::testing {

inline double MaxAbsDifference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0.0;
  return (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

// Each gradient of `b` within `dg` of `a`'s, and each weight within
// (step + 1) * lr * dg / eps: LAMB's update m / (sqrt(v) + eps) turns a
// gradient error dg into at most dg / eps, times the rate, each step.
inline void ExpectSameGradientsAndWeights(model::BertForPreTraining a, model::BertForPreTraining b,
                                          double dg, double lr, int step,
                                          const std::string& where) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_LE(MaxAbsDifference(pb[k].value().grad(), pa[k].value().grad()), dg)
        << "gradient of " << pa[k].key() << ", step " << step << where;
    EXPECT_LE(MaxAbsDifference(pb[k].value(), pa[k].value()),
              (step + 1) * lr * dg / optim::LambOptions().eps())
        << pa[k].key() << " after step " << step << where;
  }
}

}  // namespace pbert::testing
