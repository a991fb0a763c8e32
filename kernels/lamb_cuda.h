// The fused LAMB step on CUDA: multi-tensor kernels, one launch per pass
// over chunked lists of parameters (as apex's multi_tensor_apply), with
// the per-element arithmetic of kernels/lamb_math.h. No LibTorch header:
// raw pointers, sizes and a stream; a wrapper that checks ATen tensors and
// takes the current stream belongs beside optim::Lamb.
//
// Status: compiled by nvcc in CI's CUDA compile lane; not yet run on a GPU,
// nor called by optim::Lamb (docs/architecture.md, Layers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/lamb_math.h"

namespace pbert::kernels {

// Every fp32 tensor of one parameter group, by index: weights, gradients,
// the two moments, and a scratch buffer for the update direction, each of
// `sizes[i]` elements.
struct LambGroup {
  std::vector<float*> weights;
  std::vector<const float*> grads;
  std::vector<float*> exp_avg, exp_avg_sq, update;
  std::vector<int64_t> sizes;
  LambScalars scalars;
  bool trust_ratio = true;
  float lr = 0;
};

// One LAMB step of `group` on `stream`, in two passes over all its
// tensors (phase 1: moments and direction, with each tensor's squared
// norms of weights and direction summed in double into `norms`, a device
// buffer of 2 x tensors doubles; phase 2: the weights, each scaled by its
// own trust ratio). Nothing is read back to the host.
cudaError_t LambStep(const LambGroup& group, double* norms, cudaStream_t stream);

}  // namespace pbert::kernels
