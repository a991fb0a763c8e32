// The one-pass fp8 cast's CUDA side (model/fp8_kernels.h).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/fp8_cuda.h"
#include "model/fp8_kernels.h"

namespace pbert::model::fp8_kernels {

bool Built() { return true; }

void Cast(const kernels::Fp8Cast& cast, const at::Tensor& on) {
  const c10::cuda::CUDAGuard guard(on.device());
  const cudaError_t error =
      kernels::CastFp8(cast, c10::cuda::getCurrentCUDAStream(on.device().index()).stream());
  TORCH_CHECK(error == cudaSuccess, "fp8: the CUDA cast failed: ", cudaGetErrorString(error));
}

void UpdateScales(const kernels::Fp8ScaleUpdate& update, const at::Tensor& on) {
  const c10::cuda::CUDAGuard guard(on.device());
  const cudaError_t error = kernels::UpdateFp8Scales(
      update, c10::cuda::getCurrentCUDAStream(on.device().index()).stream());
  TORCH_CHECK(error == cudaSuccess, "fp8: the CUDA scale update failed: ",
              cudaGetErrorString(error));
}

}  // namespace pbert::model::fp8_kernels
