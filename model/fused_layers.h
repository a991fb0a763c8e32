// The elementwise work between a BERT layer's matrix products, fused:
//
//   BiasGelu:           gelu(y + bias)                                (intermediate)
//   BiasDropoutAddNorm: LayerNorm(dropout(y + bias) + residual)       (attention.output, output)
//
// where y is a product, without its bias where the kernels add it; on the
// CPU the product keeps its bias (addmm, as the unfused modules compute it)
// and `bias` is undefined (FusedPath). Each is one autograd function with
// two implementations of one arithmetic: the kernels' side
// (model/fused_layers_kernels.h: CUDA kernels, kernels/layer_cuda.h, one
// pass over the rows forward and one backward, or their CPU twins), and a
// reference of ATen operations (at::gelu, at::native_layer_norm and their
// backward functions) that the CPU runs and the tests compare with. The dropout mask is
// kernels::DropoutKeeps of a seed drawn from LibTorch's default CPU
// generator (model/dropout.h), on either side: the same mask for the same
// seed, reproduced on resume, and nothing drawn on (or read from) the device.
// In a captured micro-batch the kernels read that seed from a slot in
// device memory, written before each replay (model/dropout.h,
// DropoutSeedSlots).
//
// The results take the dtypes of the unfused modules under autocast:
// BiasGelu's that of y, BiasDropoutAddNorm's (and the residual gradient's)
// that of the LayerNorm weight.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/layer_math.h"

namespace pbert::model {

// Whether this build has the CUDA kernels.
bool FusedLayerKernelsBuilt();

// The CPU runs the operations through the kernels' CPU twins
// (kernels/layer_cpu.h: fp32 and bf16; the bias added by them, as the
// kernels add it), by the very code that launches the kernels on a GPU
// (model/fused_layers_kernels.h); off (the default), through the
// reference, bit for bit the unfused modules and faster. For tests and the
// workbench: what the GPU path does is then run on the CPU.
void UseFusedLayerTwins(bool on);

// Where an operation runs after the product of `x` by a layer with these
// parameters, decided here once for the model (which leaves the bias out of
// the product where the kernels add it) and the autograd function:
enum class FusedPath {
  kUnfused,    // the unfused modules: off the CPU where the kernels do not take
               // the product's dtype (autocast's, or x's) or the parameters
  kReference,  // the CPU's ATen operations; the product keeps its bias (addmm)
  kKernels,    // the CUDA kernels, or on the CPU their twins (UseFusedLayerTwins);
               // they add the bias
};
FusedPath BiasGeluPath(const at::Tensor& x, const at::Tensor& bias);
FusedPath BiasDropoutAddNormPath(const at::Tensor& x, const at::Tensor& bias,
                                 const at::Tensor& gamma);

// gelu(y + bias) over the last dimension of y (bias undefined: gelu(y));
// differentiable in both.
at::Tensor BiasGelu(const at::Tensor& y, const at::Tensor& bias);

// LayerNorm(dropout(y + bias) + residual) with weight `gamma` and bias
// `beta` (bias undefined: no bias); dropout with probability p in training
// (a fresh DrawDropout), none otherwise. Differentiable in all five tensors.
at::Tensor BiasDropoutAddNorm(const at::Tensor& y, const at::Tensor& bias,
                              const at::Tensor& residual, const at::Tensor& gamma,
                              const at::Tensor& beta, double p, double eps, bool training);

// The three parts (each [r_i, ...], the same trailing sizes, dtype and
// device) stacked along dimension 0, as one tensor for one product: an alias of
// their storage where they lie end to end in it, as PackRows lays them,
// else a copy (at::cat). Differentiable: the gradient goes back to each
// part as its rows of the whole (no copy).
at::Tensor JoinRows(const std::vector<at::Tensor>& parts);

// Lays the tensors (leaf parameters, say) end to end in one new buffer,
// each keeping its values, identity and autograd leafness (set_data), so
// that JoinRows of them is an alias: the Q, K and V weights of a layer for
// one [3h, h] product. Something that gives a tensor new storage (a move
// to another device or dtype) undoes it; PackRows again redoes it.
void PackRows(const std::vector<at::Tensor>& tensors);

// The same with a given mask draw (threshold 0: no dropout): for tests,
// which run the kernels and the reference on one mask.
at::Tensor BiasDropoutAddNorm(const at::Tensor& y, const at::Tensor& bias,
                              const at::Tensor& residual, const at::Tensor& gamma,
                              const at::Tensor& beta, const kernels::DropoutBits& bits,
                              double eps);

}  // namespace pbert::model
