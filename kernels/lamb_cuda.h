// The fused LAMB step on CUDA (kernels/lamb_ops.h): multi-tensor kernels,
// one launch per pass over chunked lists of parameters (kernels/
// multi_tensor.h, as apex's multi_tensor_apply), with the per-element
// arithmetic of kernels/lamb_math.h; their CPU twins are kernels/lamb_cpu.h.
// No LibTorch header: raw pointers, sizes and a stream; a wrapper that
// checks ATen tensors and takes the current stream belongs beside
// optim::Lamb.
//
// optim::Lamb calls it through optim/lamb_fused.h on CUDA; CI's CUDA compile
// lane compiles it with nvcc (docs/architecture.md, Kernels).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/lamb_ops.h"

namespace pbert::kernels {

// One LAMB step of `group` on `stream`, in two passes over all its
// tensors (phase 1: moments and direction, with each tensor's squared
// norms of weights and direction summed in double into `norms`, a device
// buffer of 2 x tensors doubles; phase 2: the weights, each scaled by its
// own trust ratio). Nothing is read back to the host. Memory traffic per
// parameter in fp32: phase 1 reads w, g, m, v and writes m, v, u (28
// bytes), phase 2 reads w, u and writes w (12): 40 bytes, 38 with bf16
// gradients and 40 with bf16 weights written as well.
cudaError_t LambStep(const LambGroup& group, double* norms, cudaStream_t stream);

// The squared L2 norm of each of `tensors` (fp32, or bf16 with `bf16`),
// summed in double into `norms[i]` (a device buffer of one double per
// tensor, zeroed here), in one pass over them: clipping's global gradient
// norm without a conversion of each gradient. Nothing is read back.
cudaError_t SquaredNorms(const std::vector<const void*>& tensors,
                         const std::vector<int64_t>& sizes, bool bf16, double* norms,
                         cudaStream_t stream);

}  // namespace pbert::kernels
