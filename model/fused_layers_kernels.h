// The fused layers' kernel side of model/fused_layers.h for ATen tensors:
// checks them, launches the operations of kernels/layer_ops.h and sums the
// column partials; written once (fused_layers_launch.cc) for both places
// the operations run: the CUDA kernels (kernels/layer_cuda.h) on a
// tensor's current stream, and on the CPU their twins (kernels/layer_cpu.h),
// where SetTwinsOnCpu switched them on. CUDA builds with the kernels link
// fused_layers_cuda.cc for the launches; others fused_layers_none.cc, whose
// Built says no. Internal to model/.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "kernels/layer_ops.h"

namespace pbert::model::fused_kernels {

// Whether this build has the CUDA kernels.
bool Built();

// Whether the CPU runs the operations through the twins (off: the
// reference of ATen operations in model/fused_layers.cc).
bool TwinsOnCpu();
void SetTwinsOnCpu(bool on);

// Whether the kernels (or the twins) take a product of dtype `act` with
// these parameters, on the parameters' device: fp32 or bf16 (the bias and
// LayerNorm's weight of one dtype), rows of bias.numel() columns narrow
// enough; on CUDA in a build with the kernels, on the CPU with the twins
// switched on.
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

// The CUDA launches, on device `device`'s current stream: "" or what
// failed (fused_layers_cuda.cc; fused_layers_none.cc has none).
namespace cuda {
std::string BiasGeluForward(int device, const void* y, const void* bias, void* out, int64_t rows,
                            int64_t cols, kernels::ElementType act, kernels::ElementType param);
std::string BiasGeluBackward(int device, const void* grad, const void* y, const void* bias,
                             void* dy, float* bias_partials, int64_t rows, int64_t cols,
                             kernels::ElementType act, kernels::ElementType param);
std::string NormForward(int device, const kernels::NormForward& args, int64_t rows, int64_t cols,
                        kernels::DropoutBits bits, float scale, float eps,
                        kernels::ElementType act, kernels::ElementType param);
std::string NormBackward(int device, const kernels::NormBackward& args, int64_t rows,
                         int64_t cols, kernels::DropoutBits bits, float scale,
                         kernels::ElementType act, kernels::ElementType param);
}  // namespace cuda

}  // namespace pbert::model::fused_kernels
