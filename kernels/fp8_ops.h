// The fp8 cast in one pass (model/fp8.h): a tensor read once, its fp8 copy
// written, with its transpose where the backward pass multiplies by it, and
// its largest magnitude recorded. Shared by the CUDA kernel
// (kernels/fp8_cuda.h) and its CPU twin (kernels/fp8_cpu.h), which take the
// same arguments. No CUDA or LibTorch header.
#pragma once

#include <cstdint>

#include "kernels/fp8_math.h"
#include "kernels/layer_ops.h"

namespace pbert::kernels {

// q = ToFp8(x * scale) for x [rows, cols] (row-major, of `type`) into
// `out`, [padded_rows, cols] row-major, the rows from `rows` on zero (the
// rows at::_scaled_mm's sizes need); where `out_t` is set, the same bytes
// transposed into it, [cols, padded_rows] row-major. Where `amax` is set,
// *amax = max(*amax, max |x|), a NaN in x staying a NaN; where
// `inverse_scale` is set, *inverse_scale = 1 / scale (the product's own
// scale argument, so no launch of its own). `scale` is one float in the
// device's memory (the host's for the twin).
struct Fp8Cast {
  const void* x = nullptr;
  ElementType type = ElementType::kFloat;
  int64_t rows = 0, cols = 0, padded_rows = 0;
  const float* scale = nullptr;
  Fp8Kind kind = Fp8Kind::kE4m3;
  uint8_t* out = nullptr;
  uint8_t* out_t = nullptr;
  float* amax = nullptr;
  float* inverse_scale = nullptr;
};

// The delayed scaling's update after a step (model/fp8.h, Fp8Scaling::Update)
// for every product and role at once, one entry each: `entries` = products
// x 3 (row-major, the role of entry e is e % 3), amax [entries], scale
// [entries], history [length, entries] newest first, largest [3] each
// role's format max, factor = 2^margin. Per entry: the history moves down
// one step, the amax (0 where not finite) on top; scale = largest / max
// (history) / factor where max(history) > 0 and that is finite, else as it
// was; amax = 0. In fp32, each operation rounded as ATen's.
struct Fp8ScaleUpdate {
  float* amax = nullptr;
  float* scale = nullptr;
  float* history = nullptr;
  const float* largest = nullptr;
  int64_t entries = 0, length = 0;
  float factor = 1;
};

// Whether v is neither infinite nor NaN (its exponent bits not all ones).
PBERT_HOST_DEVICE inline bool Finite(float v) {
  return (FloatBits(v) & 0x7f800000u) != 0x7f800000u;
}

PBERT_HOST_DEVICE inline void UpdateFp8Entry(const Fp8ScaleUpdate& u, int64_t e) {
  for (int64_t k = u.length - 1; k > 0; --k) {
    u.history[k * u.entries + e] = u.history[(k - 1) * u.entries + e];
  }
  const float a = u.amax[e];
  u.history[e] = Finite(a) ? a : 0.0f;
  float most = u.history[e];
  for (int64_t k = 1; k < u.length; ++k) {
    const float h = u.history[k * u.entries + e];
    most = h > most ? h : most;
  }
  const float candidate = u.largest[e % 3] / most / u.factor;
  if (most > 0.0f && Finite(candidate)) u.scale[e] = candidate;
  u.amax[e] = 0.0f;
}

// The largest of two magnitudes by their bits (non-negative floats order
// as their bits do; a NaN's bits are above infinity's): max that keeps NaN.
PBERT_HOST_DEVICE inline uint32_t MagnitudeBits(float v) { return FloatBits(v) & 0x7fffffffu; }

}  // namespace pbert::kernels
