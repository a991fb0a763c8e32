// The one-pass fp8 cast on CUDA (kernels/fp8_ops.h): 32 x 32 tiles, each
// read once (coalesced), written as fp8 by rows and, through shared
// memory, transposed (coalesced); the largest magnitude reduced per block
// and folded into *amax with one atomic per block. Its CPU twin is
// kernels/fp8_cpu.h. No LibTorch header.
#pragma once

#include <cuda_runtime.h>

#include "kernels/fp8_ops.h"

namespace pbert::kernels {

cudaError_t CastFp8(const Fp8Cast& cast, cudaStream_t stream);

}  // namespace pbert::kernels
