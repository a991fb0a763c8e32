// The CPU twin of the one-pass fp8 cast (kernels/fp8_cuda.h): the same
// arguments, the same per-element arithmetic (kernels/fp8_math.h), so the
// same bytes and the same largest magnitude. The fp8 emulation
// (model.fp8_emulation) casts through it on the CPU. No LibTorch header.
#pragma once

#include "kernels/fp8_ops.h"

namespace pbert::kernels::cpu {

void CastFp8(const Fp8Cast& cast);

// Every entry's UpdateFp8Entry (kernels/fp8_ops.h).
void UpdateFp8Scales(const Fp8ScaleUpdate& update);

}  // namespace pbert::kernels::cpu
