// The fp8 formats from their definitions, in double, independently of
// kernels/fp8_math.h: the reference of the cast's tests (tests/kernels/
// fp8_cast_test.cc, tests/model/fp8_test.cc).
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/fp8_math.h"

namespace pbert::kernels::testing {

// The value of `kind` nearest to v, ties to even, saturated to the largest
// (e4m3: 3 mantissa bits, exponents from -6, largest 448; e5m2: 2 bits,
// from -14, largest 57344); a NaN stays.
inline double RoundToFormat(double v, Fp8Kind kind) {
  if (std::isnan(v)) return v;
  const int mantissa = kind == Fp8Kind::kE4m3 ? 3 : 2;
  const int min_exponent = kind == Fp8Kind::kE4m3 ? -6 : -14;
  const double largest = kind == Fp8Kind::kE4m3 ? 448.0 : 57344.0;
  const double a = std::min(std::fabs(v), largest);
  if (a == 0) return std::copysign(0.0, v);
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa);
  return std::copysign(std::nearbyint(a / ulp) * ulp, v);  // nearbyint: ties to even
}

}  // namespace pbert::kernels::testing
