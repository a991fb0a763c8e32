// The fused LAMB step's interface (optim/lamb_fused.h), shared by the CUDA
// kernels (kernels/lamb_cuda.h) and their CPU twins (kernels/lamb_cpu.h),
// which take the same arguments: raw pointers and sizes of one parameter
// group, with the per-element arithmetic of kernels/lamb_math.h. No CUDA or
// LibTorch header.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/lamb_math.h"

namespace pbert::kernels {

// Every tensor of one parameter group, by index, each of `sizes[i]`
// elements: the fp32 weights (the master weights where the model computes
// in bf16), the gradients (fp32, or the model's bf16 ones), the two fp32
// moments, an fp32 scratch buffer for the update direction, and, where the
// model keeps bf16 weights, those (as their 16-bit patterns), written from
// the updated fp32 ones (rounded to nearest even, as ATen's casts round).
struct LambGroup {
  std::vector<float*> weights;
  std::vector<const void*> grads;
  bool bf16_grads = false;
  std::vector<float*> exp_avg, exp_avg_sq, update;
  std::vector<uint16_t*> bf16_weights;  // empty, or one per tensor
  std::vector<int64_t> sizes;
  LambScalars scalars;
  // The clipping coefficient (a double in the device's memory, the host's
  // for the twin), read in place of scalars.clip, so that clipping reads
  // nothing back; null: scalars.clip.
  const double* clip = nullptr;
  bool trust_ratio = true;
  float lr = 0;
};

}  // namespace pbert::kernels
