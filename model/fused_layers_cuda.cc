// The fused layers' CUDA launches (model/fused_layers_kernels.h): the
// kernels of kernels/layer_cuda.h on the device's current stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/layer_cuda.h"
#include "model/fused_layers_kernels.h"

namespace pbert::model::fused_kernels {

bool Built() { return true; }

namespace cuda {
namespace {

cudaStream_t StreamOn(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

std::string Outcome(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return "";
  return std::string("the CUDA kernel ") + what + " failed: " + cudaGetErrorString(error);
}

c10::Device On(int device) { return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)); }

}  // namespace

std::string BiasGeluForward(int device, const void* y, const void* bias, void* out, int64_t rows,
                            int64_t cols, kernels::ElementType act, kernels::ElementType param) {
  const c10::cuda::CUDAGuard guard(On(device));
  return Outcome(kernels::BiasGeluForward(y, bias, out, rows, cols, act, param, StreamOn(device)),
                 "BiasGeluForward");
}

std::string BiasGeluBackward(int device, const void* grad, const void* y, const void* bias,
                             void* dy, float* bias_partials, int64_t rows, int64_t cols,
                             kernels::ElementType act, kernels::ElementType param) {
  const c10::cuda::CUDAGuard guard(On(device));
  return Outcome(kernels::BiasGeluBackward(grad, y, bias, dy, bias_partials, rows, cols, act,
                                           param, StreamOn(device)),
                 "BiasGeluBackward");
}

std::string NormForward(int device, const kernels::NormForward& args, int64_t rows, int64_t cols,
                        kernels::DropoutBits bits, float scale, float eps,
                        kernels::ElementType act, kernels::ElementType param) {
  const c10::cuda::CUDAGuard guard(On(device));
  return Outcome(kernels::BiasDropoutAddNormForward(args, rows, cols, bits, scale, eps, act, param,
                                                    StreamOn(device)),
                 "BiasDropoutAddNormForward");
}

std::string NormBackward(int device, const kernels::NormBackward& args, int64_t rows,
                         int64_t cols, kernels::DropoutBits bits, float scale,
                         kernels::ElementType act, kernels::ElementType param) {
  const c10::cuda::CUDAGuard guard(On(device));
  return Outcome(kernels::BiasDropoutAddNormBackward(args, rows, cols, bits, scale, act, param,
                                                     StreamOn(device)),
                 "BiasDropoutAddNormBackward");
}

}  // namespace cuda
}  // namespace pbert::model::fused_kernels
