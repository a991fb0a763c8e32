// The fused layer operations on CUDA (kernels/layer_ops.h), each one pass
// over its rows with the per-element arithmetic of kernels/layer_math.h;
// their CPU twins, with the same arguments but the stream, are
// kernels/layer_cpu.h. No LibTorch header: model/fused_layers_cuda.cc
// checks ATen tensors and calls these; bench/kernels measures them against
// the twins.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/layer_ops.h"

namespace pbert::kernels {

// out = gelu(y + bias): y and out of type `act`, bias of type `param`.
cudaError_t BiasGeluForward(const void* y, const void* bias, void* out, int64_t rows, int64_t cols,
                            ElementType act, ElementType param, cudaStream_t stream);

// dy = grad * gelu'(y + bias) (type `act`, as grad and y), and the bias
// gradient's partial sums of dy before rounding, into `bias_partials`.
cudaError_t BiasGeluBackward(const void* grad, const void* y, const void* bias, void* dy,
                             float* bias_partials, int64_t rows, int64_t cols, ElementType act,
                             ElementType param, cudaStream_t stream);

// z = dropout(y + bias) + residual, out = LayerNorm(z) * gamma + beta
// (kernels/layer_ops.h).
cudaError_t BiasDropoutAddNormForward(const NormForward& args, int64_t rows, int64_t cols,
                                      DropoutBits bits, float scale, float eps, ElementType act,
                                      ElementType param, cudaStream_t stream);

// Its backward pass (kernels/layer_ops.h).
cudaError_t BiasDropoutAddNormBackward(const NormBackward& args, int64_t rows, int64_t cols,
                                       DropoutBits bits, float scale, ElementType act,
                                       ElementType param, cudaStream_t stream);

}  // namespace pbert::kernels
