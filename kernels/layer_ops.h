// The fused layer operations' interface (model/fused_layers.h), shared by
// the CUDA kernels (kernels/layer_cuda.h) and their CPU twins
// (kernels/layer_cpu.h), which take the same arguments: raw pointers of
// row-major [rows, cols] tensors and their element types. Bias and GELU
// after the feed-forward's first product; bias, dropout, residual add and
// LayerNorm after the attention output's and the feed-forward's second
// product; forward and backward. No CUDA or LibTorch header.
//
// Everything is computed in fp32. A bias gradient (and LayerNorm's weight
// and bias gradients) is returned as partial sums, one row of `cols` fp32
// values per block of rows, [ColumnBlocks(rows), cols], that the caller
// sums; block b takes rows b, b + B, b + 2B, ... (B = ColumnBlocks(rows)).
#pragma once

#include <cstdint>

#include "kernels/layer_math.h"

namespace pbert::kernels {

enum class ElementType { kFloat, kBFloat16 };

// The most blocks of partial sums a backward operation writes.
inline constexpr int64_t kMaxColumnBlocks = 1024;

// The rows of partial sums a backward operation writes for `rows` rows.
inline int64_t ColumnBlocks(int64_t rows) {
  return rows < kMaxColumnBlocks ? rows : kMaxColumnBlocks;
}

// The widest rows each operation takes (the kernels keep their column sums
// in shared memory); the caller takes another path for wider ones.
inline constexpr int64_t kMaxGeluCols = 12000;  // (48 KiB of shared memory, less the reductions')
inline constexpr int64_t kMaxNormCols = 4000;

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

}  // namespace pbert::kernels
