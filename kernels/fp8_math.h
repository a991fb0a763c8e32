// The per-element arithmetic of the fp8 casts (model/fp8.h), one
// definition for the CPU and the GPU: a float saturated to the format's
// largest value and rounded to the nearest value of the format, ties to
// even, as ATen's clamp and cast to at::kFloat8_e4m3fn / kFloat8_e5m2 do
// (bit for bit: tests/kernels/fp8_cast_test.cc, tests/model/fp8_test.cc),
// and back.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace pbert::kernels {

enum class Fp8Kind { kE4m3, kE5m2 };  // e4m3fn (no infinities) and e5m2

PBERT_HOST_DEVICE inline int Fp8MantissaBits(Fp8Kind k) { return k == Fp8Kind::kE4m3 ? 3 : 2; }
PBERT_HOST_DEVICE inline int Fp8Bias(Fp8Kind k) { return k == Fp8Kind::kE4m3 ? 7 : 15; }
PBERT_HOST_DEVICE inline float Fp8Largest(Fp8Kind k) {
  return k == Fp8Kind::kE4m3 ? 448.0f : 57344.0f;
}

PBERT_HOST_DEVICE inline uint32_t FloatBits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
#endif
}

// v (already multiplied by its scale) saturated to +-Fp8Largest and
// rounded to `kind`, ties to even; a NaN gives the format's NaN (0x7f,
// with v's sign).
PBERT_HOST_DEVICE inline uint8_t ToFp8(float v, Fp8Kind kind) {
  const uint32_t bits = FloatBits(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (v != v) return static_cast<uint8_t>(sign | 0x7f);
  const float largest = Fp8Largest(kind);
  float a = fabsf(v);
  if (a > largest) a = largest;
  if (a == 0.0f) return sign;
  const int mantissa = Fp8MantissaBits(kind), bias = Fp8Bias(kind);
  const int min_exponent = 1 - bias;
  int e = static_cast<int>((FloatBits(a) >> 23) & 0xffu) - 127;  // floor(log2 a) for normals
  if (e < min_exponent) e = min_exponent;                          // the format's subnormals
  // a in units of the format's spacing at e: below 2^(mantissa + 1), exact.
  float q = rintf(ldexpf(a, mantissa - e));  // rintf: to nearest, ties to even
  if (q >= static_cast<float>(2 << mantissa)) {  // rounded up into the next binade
    q = static_cast<float>(1 << mantissa);
    ++e;
  }
  const int r = static_cast<int>(q);
  if (r < (1 << mantissa)) return static_cast<uint8_t>(sign | r);  // subnormal (e at its least)
  return static_cast<uint8_t>(sign | ((e + bias) << mantissa) | (r - (1 << mantissa)));
}

// The value of an fp8 byte of `kind`.
PBERT_HOST_DEVICE inline float FromFp8(uint8_t byte, Fp8Kind kind) {
  const int mantissa = Fp8MantissaBits(kind), bias = Fp8Bias(kind);
  const int exponent_field = (byte & 0x7f) >> mantissa;
  const int fraction = byte & ((1 << mantissa) - 1);
  const float sign = (byte & 0x80) != 0 ? -1.0f : 1.0f;
  if (kind == Fp8Kind::kE4m3 && (byte & 0x7f) == 0x7f) return NAN;
  if (kind == Fp8Kind::kE5m2 && exponent_field == 31) return fraction == 0 ? sign * INFINITY : NAN;
  if (exponent_field == 0) return sign * ldexpf(static_cast<float>(fraction), 1 - bias - mantissa);
  return sign * ldexpf(static_cast<float>((1 << mantissa) + fraction), exponent_field - bias - mantissa);
}

}  // namespace pbert::kernels
