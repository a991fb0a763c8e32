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
// *amax = max(*amax, max |x|), a NaN in x staying a NaN. `scale` is one
// float in the device's memory (the host's for the twin).
struct Fp8Cast {
  const void* x = nullptr;
  ElementType type = ElementType::kFloat;
  int64_t rows = 0, cols = 0, padded_rows = 0;
  const float* scale = nullptr;
  Fp8Kind kind = Fp8Kind::kE4m3;
  uint8_t* out = nullptr;
  uint8_t* out_t = nullptr;
  float* amax = nullptr;
};

// The largest of two magnitudes by their bits (non-negative floats order
// as their bits do; a NaN's bits are above infinity's): max that keeps NaN.
PBERT_HOST_DEVICE inline uint32_t MagnitudeBits(float v) { return FloatBits(v) & 0x7fffffffu; }

}  // namespace pbert::kernels
