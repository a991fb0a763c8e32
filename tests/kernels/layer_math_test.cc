// The fused layers' per-element arithmetic (kernels/layer_math.h), which
// the CUDA kernels run, in fp32 on the CPU against double precision, within
// the bounds of tests/kernels/error_bounds.h that the CUDA test
// (tests/train/cuda_test.cc) holds the kernels to.
#include "kernels/layer_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/error_bounds.h"

namespace pbert::kernels {
namespace {

using testing::GeluBound;
using testing::GeluErrorBound;
using testing::kFp32Unit;

// The inputs the kernels see: y (an activation) plus a bias, both fp32,
// added in fp32; their exact sum in double. A dense sweep of [-12, 12] (the
// cancelling tail included) and normal draws as the CUDA test's.
struct Input {
  float y, bias;
};
std::vector<Input> Inputs() {
  std::vector<Input> in;
  for (int k = -120000; k <= 120000; ++k) in.push_back({static_cast<float>(k * 1e-4), 0.f});
  std::mt19937_64 random(31);
  std::normal_distribution<float> normal;
  for (int k = 0; k < 1000000; ++k) in.push_back({normal(random), 0.5f * normal(random)});
  return in;
}

double ExactGelu(double x) { return 0.5 * x * (1 + std::erf(x * 0.70710678118654752)); }
double ExactGeluGrad(double x) {
  return 0.5 * (1 + std::erf(x * 0.70710678118654752)) +
         x * std::exp(-0.5 * x * x) * testing::kInvSqrt2Pi;
}

TEST(LayerMathTest, GeluAndItsGradientAreWithinTheirRoundingBounds) {
  double worst_out = 0, worst_grad = 0;  // the largest error as a share of its bound
  int64_t over_out = 0, over_grad = 0, over_naive = 0;
  for (const Input& in : Inputs()) {
    const double x = static_cast<double>(in.y) + static_cast<double>(in.bias);
    const float xf = in.y + in.bias;
    const GeluBound bound = GeluErrorBound(x);
    const double out_error = std::fabs(Gelu(xf) - ExactGelu(x));
    const double grad_error = std::fabs(GeluGrad(xf) - ExactGeluGrad(x));
    over_out += out_error > bound.out;
    over_grad += grad_error > bound.grad;
    worst_out = std::max(worst_out, out_error / bound.out);
    worst_grad = std::max(worst_grad, grad_error / bound.grad);
    // A bound relative to the result and its slope alone (8 ulps of each),
    // blind to the cancellation in 1 + erf: exceeded in the negative tail.
    const double naive = 8 * kFp32Unit *
                         (std::fabs(x * ExactGeluGrad(x)) + std::fabs(ExactGelu(x)));
    over_naive += out_error > naive;
  }
  EXPECT_EQ(over_out, 0) << "GELU outputs over their bound (worst at " << worst_out << " of it)";
  EXPECT_EQ(over_grad, 0) << "GELU gradients over their bound (worst " << worst_grad << ")";
  // Not vacuous: some error reaches a sizeable share of its bound.
  EXPECT_GT(worst_out, 1.0 / 32);
  EXPECT_GT(worst_grad, 1.0 / 32);
  EXPECT_GT(over_naive, 0) << "the cancellation in 1 + erf(x / sqrt 2) was expected to show";
}

}  // namespace
}  // namespace pbert::kernels
