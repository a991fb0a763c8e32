// The fused LAMB of a build without CUDA: none (optim/lamb_fused.h).
#include "optim/lamb_fused.h"

#include <c10/util/Exception.h>

namespace pbert::optim {

bool FusedLambBuilt() { return false; }

void FusedLambStep(const FusedLambGroup&, const LambOptions&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused LAMB)");
}

at::Tensor FusedSquaredNorms(const std::vector<at::Tensor>&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused norms)");
}

}  // namespace pbert::optim
