// The CUDA side of model/fused_layers.h for ATen tensors: checks them,
// launches kernels/layer_cuda.h on the current stream and sums the column
// partials. CUDA builds with the kernels link fused_layers_cuda.cc; others
// fused_layers_none.cc, whose Takes says no. Internal to model/.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/layer_math.h"

namespace pbert::model::fused_kernels {

bool Built();

// Whether the kernels take a product of dtype `act` with these parameters:
// on CUDA, fp32 or bf16 (the bias and LayerNorm's weight of one dtype),
// rows of bias.numel() columns narrow enough.
bool TakesGelu(at::ScalarType act, const at::Tensor& bias);
bool TakesNorm(at::ScalarType act, const at::Tensor& bias, const at::Tensor& gamma);

// y [N, F] contiguous, bias [F]: gelu(y + bias) in y's dtype.
at::Tensor BiasGeluForward(const at::Tensor& y, const at::Tensor& bias);
// The gradients of y (y's dtype) and of the bias (the bias' dtype).
std::tuple<at::Tensor, at::Tensor> BiasGeluBackward(const at::Tensor& grad, const at::Tensor& y,
                                                    const at::Tensor& bias);

// y [N, H] contiguous; residual [N, H] in gamma's dtype. Returns out, z,
// mean, rstd (the last two fp32 [N]).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormForward(
    const at::Tensor& y, const at::Tensor& bias, const at::Tensor& residual,
    const at::Tensor& gamma, const at::Tensor& beta, const kernels::DropoutBits& bits,
    double scale, double eps);
// The gradients of z (= the residual's), y (in `y_dtype`), bias, gamma,
// beta.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormBackward(
    const at::Tensor& grad, const at::Tensor& z, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& gamma, const kernels::DropoutBits& bits, double scale,
    at::ScalarType y_dtype);

}  // namespace pbert::model::fused_kernels
