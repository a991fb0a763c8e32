// The fused layer operations on CUDA (model/fused_layers.h): bias and GELU
// after the feed-forward's first product, and bias, dropout, residual add
// and LayerNorm after the attention output's and the feed-forward's second
// product, forward and backward, each one pass over its rows, with the
// per-element arithmetic of kernels/layer_math.h. No LibTorch header: raw
// pointers of row-major [rows, cols] tensors, their element types, and a
// stream; model/fused_layers_cuda.cc checks ATen tensors and calls these.
//
// Every kernel computes in fp32. A bias gradient (and LayerNorm's weight
// and bias gradients) is returned as partial sums, one row of `cols` fp32
// values per block, [ColumnBlocks(rows), cols], that the caller sums.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/layer_math.h"

namespace pbert::kernels {

enum class ElementType { kFloat, kBFloat16 };

// The rows of partial sums a backward kernel writes for `rows` rows.
int64_t ColumnBlocks(int64_t rows);

// The widest rows each operation takes (its column sums live in shared
// memory); the caller takes another path for wider ones.
inline constexpr int64_t kMaxGeluCols = 12000;  // (48 KiB of shared memory, less the reductions')
inline constexpr int64_t kMaxNormCols = 4000;

// out = gelu(y + bias): y and out of type `act`, bias of type `param`.
cudaError_t BiasGeluForward(const void* y, const void* bias, void* out, int64_t rows, int64_t cols,
                            ElementType act, ElementType param, cudaStream_t stream);

// dy = grad * gelu'(y + bias) (type `act`, as grad and y), and the bias
// gradient's partial sums of dy before rounding, into `bias_partials`.
cudaError_t BiasGeluBackward(const void* grad, const void* y, const void* bias, void* dy,
                             float* bias_partials, int64_t rows, int64_t cols, ElementType act,
                             ElementType param, cudaStream_t stream);

// z = dropout(y + bias) + residual, out = LayerNorm(z) * gamma + beta, per
// row of `cols`: y of type `act`; bias, residual, gamma, beta, z and out of
// type `param`. z (rounded to `param`, and normalized as rounded) is kept
// for the backward pass with each row's mean and 1/sqrt(var + eps) (fp32).
// The dropout keeps element i (of the flat [rows, cols] tensor) where
// DropoutKeeps(bits, i), scaling it by `scale`.
struct NormForward {
  const void* y;
  const void* bias;
  const void* residual;
  const void* gamma;
  const void* beta;
  void* z;
  void* out;
  float* mean;
  float* rstd;
};
cudaError_t BiasDropoutAddNormForward(const NormForward& args, int64_t rows, int64_t cols,
                                      DropoutBits bits, float scale, float eps, ElementType act,
                                      ElementType param, cudaStream_t stream);

// The backward pass of BiasDropoutAddNormForward for the gradient `grad`
// of out (type `param`): the gradient of z, which is the residual's
// (`dz`, type `param`); of y (`dy`, type `act`); and the partial sums of
// the bias', gamma's and beta's gradients (fp32).
struct NormBackward {
  const void* grad;
  const void* z;
  const float* mean;
  const float* rstd;
  const void* gamma;
  void* dz;
  void* dy;
  float* bias_partials;
  float* gamma_partials;
  float* beta_partials;
};
cudaError_t BiasDropoutAddNormBackward(const NormBackward& args, int64_t rows, int64_t cols,
                                       DropoutBits bits, float scale, ElementType act,
                                       ElementType param, cudaStream_t stream);

}  // namespace pbert::kernels
