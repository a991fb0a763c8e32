// The one-pass fp8 cast's CUDA side in a build without the kernels: none
// (model/fp8_kernels.h); casts on a GPU run as ATen operations.
#include <c10/util/Exception.h>

#include "model/fp8_kernels.h"

namespace pbert::model::fp8_kernels {

bool Built() { return false; }

void Cast(const kernels::Fp8Cast&, const at::Tensor&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fp8 casts)");
}

void UpdateScales(const kernels::Fp8ScaleUpdate&, const at::Tensor&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fp8 scales)");
}

}  // namespace pbert::model::fp8_kernels
