// LAMB's step in the fused CUDA kernels (kernels/lamb_cuda.h) for ATen
// tensors, which optim::Lamb runs on a CUDA device in place of its
// _foreach operations (Lamb::UseFusedKernels). CUDA builds link the side
// that launches them (lamb_fused_cuda.cc); CPU builds one that has none.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace pbert::kernels {
struct LambGroup;
}  // namespace pbert::kernels

namespace pbert::optim {

struct LambOptions;

// Whether this build has the fused kernels.
bool FusedLambBuilt();

// One group's tensors, each list one entry per parameter, on one CUDA
// device and dense: fp32 weights, gradients (all fp32 or all bf16), fp32
// moments, and the model's bf16 copies of the weights (empty, or one per
// weight). The bias corrections 1 - beta^t (or 1) of the group's step, and
// clipping's coefficient (undefined: none; else a 0-dim tensor).
struct FusedLambGroup {
  std::vector<at::Tensor> weights, grads, exp_avg, exp_avg_sq, bf16_weights;
  double bias_correction1 = 1, bias_correction2 = 1;
  at::Tensor clip;
};

// The scalars of one fused step of a group with `options` and these bias
// corrections, into group.scalars, trust_ratio and lr: each rounded to
// float once, as ATen's _foreach operations round their scalars
// (kernels/lamb_math.h). For the kernels and their CPU twins alike.
void SetLambScalars(const LambOptions& options, double bias_correction1,
                    double bias_correction2, kernels::LambGroup& group);

// Launches the step on the current CUDA stream; reads nothing back. Throws
// c10::Error (as LibTorch's own operations) if the tensors are not as
// above, the kernels fail to launch, or this build has none.
void FusedLambStep(const FusedLambGroup& group, const LambOptions& options);

// Each tensor's squared L2 norm, summed in double, as one [N] double tensor
// on their device, in one pass (kernels::SquaredNorms); the tensors dense,
// on one CUDA device, all fp32 or all bf16. Throws as FusedLambStep.
at::Tensor FusedSquaredNorms(const std::vector<at::Tensor>& tensors);

}  // namespace pbert::optim
