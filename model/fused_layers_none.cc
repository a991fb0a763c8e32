// The fused layers' CUDA launches in a build without the kernels: none, so
// the reference (or the twins) runs on the CPU and the unfused modules on a
// GPU (model/fused_layers_kernels.h).
#include "model/fused_layers_kernels.h"

namespace pbert::model::fused_kernels {

bool Built() { return false; }

namespace cuda {
namespace {
constexpr char kNone[] = "this build of packed-bert has no CUDA kernels (fused layers)";
}  // namespace

std::string BiasGeluForward(int, const void*, const void*, void*, int64_t, int64_t,
                            kernels::ElementType, kernels::ElementType) {
  return kNone;
}
std::string BiasGeluBackward(int, const void*, const void*, const void*, void*, float*, int64_t,
                             int64_t, kernels::ElementType, kernels::ElementType) {
  return kNone;
}
std::string NormForward(int, const kernels::NormForward&, int64_t, int64_t, kernels::DropoutBits,
                        float, float, kernels::ElementType, kernels::ElementType) {
  return kNone;
}
std::string NormBackward(int, const kernels::NormBackward&, int64_t, int64_t,
                         kernels::DropoutBits, float, kernels::ElementType,
                         kernels::ElementType) {
  return kNone;
}

}  // namespace cuda
}  // namespace pbert::model::fused_kernels
