// The fused layers' CUDA side in a build without the kernels: none, so the
// reference runs on the CPU and the unfused modules on a GPU
// (model/fused_layers_kernels.h).
#include <c10/util/Exception.h>

#include "model/fused_layers_kernels.h"

namespace pbert::model::fused_kernels {

bool Built() { return false; }
bool TakesGelu(at::ScalarType, const at::Tensor&) { return false; }
bool TakesNorm(at::ScalarType, const at::Tensor&, const at::Tensor&) { return false; }

at::Tensor BiasGeluForward(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused layers)");
}
std::tuple<at::Tensor, at::Tensor> BiasGeluBackward(const at::Tensor&, const at::Tensor&,
                                                    const at::Tensor&) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused layers)");
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormForward(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const kernels::DropoutBits&, double, double) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused layers)");
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormBackward(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const kernels::DropoutBits&, double, at::ScalarType) {
  TORCH_CHECK(false, "this build of packed-bert has no CUDA kernels (fused layers)");
}

}  // namespace pbert::model::fused_kernels
