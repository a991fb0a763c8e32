// The fused LAMB step on CUDA: multi-tensor kernels, one launch per pass
// over chunked lists of parameters (as apex's multi_tensor_apply), with
// the per-element arithmetic of kernels/lamb_math.h. No LibTorch header:
// raw pointers, sizes and a stream; a wrapper that checks ATen tensors and
// takes the current stream belongs beside optim::Lamb.
//
// optim::Lamb calls it through optim/lamb_fused.h on CUDA; CI's CUDA compile
// lane compiles it with nvcc (docs/architecture.md, Kernels).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/lamb_math.h"

namespace pbert::kernels {

// Every tensor of one parameter group, by index, each of `sizes[i]`
// elements: the fp32 weights (the master weights where the model computes
// in bf16), the gradients (fp32, or the model's bf16 ones), the two fp32
// moments, an fp32 scratch buffer for the update direction, and, where the
// model keeps bf16 weights, those, written from the updated fp32 ones
// (rounded to nearest even, as ATen's casts round).
struct LambGroup {
  std::vector<float*> weights;
  std::vector<const void*> grads;
  bool bf16_grads = false;
  std::vector<float*> exp_avg, exp_avg_sq, update;
  std::vector<__nv_bfloat16*> bf16_weights;  // empty, or one per tensor
  std::vector<int64_t> sizes;
  LambScalars scalars;
  // The clipping coefficient on the device (a 0-dim double), read by the
  // kernels in place of scalars.clip, so that clipping reads nothing back;
  // null: scalars.clip.
  const double* clip = nullptr;
  bool trust_ratio = true;
  float lr = 0;
};

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
