// Bounds on the rounding error of the fused kernels' per-element arithmetic
// (kernels/layer_math.h), computed in fp32, against the exact value: each
// operation's own error carried through, so that a test holds on every
// device and CPU whose erff and expf are within 2 ulps (CUDA's documented
// maximum; glibc's is 1) and fails where the arithmetic changes.
//
// GELU's 1 + erf(x / sqrt 2) cancels for x below about -3: erf is near -1
// there, and its error (a few ulps of 1) is a large part of the small sum,
// so the bound keeps a term of the size of |x| ulps where the result
// itself is tiny (tests/kernels/layer_math_test.cc shows a bound without it
// exceeded).
#pragma once

#include <cmath>

namespace pbert::kernels::testing {

inline constexpr double kFp32Unit = 1.0 / (1 << 24);  // fp32's unit roundoff, u
inline constexpr double kBf16Unit = 1.0 / (1 << 8);
inline constexpr double kInvSqrt2Pi = 0.39894228040143268;
// The products of two errors (u^2 terms) and the slack of bounding a
// derivative over an interval of a few ulps, folded into one factor.
inline constexpr double kSecondOrder = 1.01;

// Bounds on |Gelu(fl(x)) - gelu(x)| and |GeluGrad(fl(x)) - gelu'(x)|, where
// fl(x) is x rounded once to fp32 (the kernels add the bias in fp32):
//   e = erff(x c)      argument off by 3u |x c|, erff within 2 ulps (4u |e|)
//   gelu = 0.5 x (1 + e)            two roundings, and x's own
//   gelu' = 0.5 (1 + e) + x phi(x)  phi through expf: its argument off by
//                                   1.5 u x^2, expf within 2 ulps, then four
//                                   more roundings
struct GeluBound {
  double out = 0, grad = 0;
};
inline GeluBound GeluErrorBound(double x) {
  const double u = kFp32Unit, ax = std::fabs(x);
  const double e = std::erf(x * 0.70710678118654752);
  const double phi = std::exp(-0.5 * x * x) * kInvSqrt2Pi;
  const double gelu = 0.5 * x * (1 + e), cdf = 0.5 * (1 + e), grad = cdf + x * phi;
  GeluBound b;
  // 0.5 |x| (4u |e| + 6u |x| phi + u |1 + e|) + 2u |gelu|
  b.out = kSecondOrder * u * (2 * ax * std::fabs(e) + 3 * x * x * phi + 3 * std::fabs(gelu));
  // 0.5 (4u |e| + 6u |x| phi + u |1 + e|) + (1.5 x^2 + 8) u |x| phi + u |gelu'|
  b.grad = kSecondOrder * u *
           (2 * std::fabs(e) + 3 * ax * phi + cdf + (1.5 * x * x + 8) * ax * phi + std::fabs(grad));
  return b;
}

}  // namespace pbert::kernels::testing
