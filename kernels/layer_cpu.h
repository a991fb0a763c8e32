// The CPU twins of the fused layer kernels (kernels/layer_cuda.h): the same
// operations with the same arguments (no stream), the same per-element
// arithmetic in fp32 (kernels/layer_math.h), the same rows per block of
// partial sums, each block's rows summed in the kernels' order; only the
// sums within a row (LayerNorm's statistics) run in order where the kernels
// reduce over a block's threads. Each returns false where its kernel
// refuses the arguments (cudaErrorInvalidValue: rows wider than it takes).
// tests/kernels/ checks the twins against double precision, within bounds
// derived from their arithmetic; bench/kernels checks the kernels against
// the twins. No LibTorch header.
#pragma once

#include <cstdint>

#include "kernels/layer_ops.h"

namespace pbert::kernels::cpu {

// out = gelu(y + bias): y and out of type `act`, bias of type `param`.
bool BiasGeluForward(const void* y, const void* bias, void* out, int64_t rows, int64_t cols,
                     ElementType act, ElementType param);

// dy = grad * gelu'(y + bias) (type `act`), and the bias gradient's partial
// sums of dy before rounding.
bool BiasGeluBackward(const void* grad, const void* y, const void* bias, void* dy,
                      float* bias_partials, int64_t rows, int64_t cols, ElementType act,
                      ElementType param);

bool BiasDropoutAddNormForward(const NormForward& args, int64_t rows, int64_t cols,
                               DropoutBits bits, float scale, float eps, ElementType act,
                               ElementType param);

bool BiasDropoutAddNormBackward(const NormBackward& args, int64_t rows, int64_t cols,
                                DropoutBits bits, float scale, ElementType act, ElementType param);

// bf16 as stored: the float's top 16 bits, rounded to nearest even (NaN
// kept a NaN), and back.
uint16_t ToBf16(float value);
float FromBf16(uint16_t bits);

}  // namespace pbert::kernels::cpu
