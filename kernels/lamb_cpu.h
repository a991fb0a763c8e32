// The CPU twins of the fused LAMB kernels (kernels/lamb_cuda.h): the same
// arguments (no stream), the same per-element arithmetic
// (kernels/lamb_math.h), each tensor's squared norms summed in double in
// element order (the kernels sum per block, then add the blocks'). The
// reference of tests/optim/lamb_math_test.cc against optim::Lamb. No
// LibTorch header.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/lamb_ops.h"

namespace pbert::kernels::cpu {

// One LAMB step of `group`: phase 1 (moments and direction, and into
// `norms`, 2 x tensors doubles, each tensor's squared norms of weights and
// direction), then phase 2 (the weights, each scaled by its trust ratio).
void LambStep(const LambGroup& group, double* norms);

// The squared L2 norm of each of `tensors` (fp32, or bf16 with `bf16`),
// summed in double into norms[i].
void SquaredNorms(const std::vector<const void*>& tensors, const std::vector<int64_t>& sizes,
                  bool bf16, double* norms);

}  // namespace pbert::kernels::cpu
