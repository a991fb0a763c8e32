// The CUDA side of the one-pass fp8 cast (kernels/fp8_cuda.h) for
// model/fp8.cc: CUDA builds with the kernels link fp8_cuda.cc, others
// fp8_none.cc, whose Built says no (the cast then runs as ATen operations
// on a GPU). Internal to model/.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/fp8_ops.h"

namespace pbert::model::fp8_kernels {

bool Built();

// kernels::CastFp8(cast) on the current stream of `on`'s device.
void Cast(const kernels::Fp8Cast& cast, const at::Tensor& on);

// kernels::UpdateFp8Scales(update) on the current stream of `on`'s device.
void UpdateScales(const kernels::Fp8ScaleUpdate& update, const at::Tensor& on);

}  // namespace pbert::model::fp8_kernels
