// The fp8 kernels (kernels/fp8_ops.h). The one-pass cast: 32 x 32 tiles, each
// read once (coalesced), written as fp8 by rows and, through shared
// memory, transposed (coalesced); the largest magnitude reduced per block
// and folded into *amax with one atomic per block. The scales' update after
// a step, every product's in one launch. Their CPU twins are
// kernels/fp8_cpu.h. No LibTorch header.
#pragma once

#include <cuda_runtime.h>

#include "kernels/fp8_ops.h"

namespace pbert::kernels {

cudaError_t CastFp8(const Fp8Cast& cast, cudaStream_t stream);

// Every entry's UpdateFp8Entry, one thread each, in one launch.
cudaError_t UpdateFp8Scales(const Fp8ScaleUpdate& update, cudaStream_t stream);

}  // namespace pbert::kernels
