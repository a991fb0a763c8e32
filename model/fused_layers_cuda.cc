// The fused layers' CUDA side (model/fused_layers_kernels.h): ATen tensors
// checked and handed to kernels/layer_cuda.h on the current stream.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/layer_cuda.h"
#include "model/fused_layers_kernels.h"

namespace pbert::model::fused_kernels {
namespace {

bool Takes(at::ScalarType type) { return type == at::kFloat || type == at::kBFloat16; }

kernels::ElementType TypeOf(at::ScalarType type) {
  return type == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat;
}

cudaStream_t StreamOf(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

void Check(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, "fused layers: the CUDA kernel ", what, " failed: ",
              cudaGetErrorString(error));
}

// The column partials' sum, in `type`.
at::Tensor SumPartials(const at::Tensor& partials, at::ScalarType type) {
  return partials.sum(0).to(type);
}

}  // namespace

bool Built() { return true; }

bool TakesGelu(at::ScalarType act, const at::Tensor& bias) {
  return bias.is_cuda() && Takes(act) && Takes(bias.scalar_type()) && bias.numel() > 0 &&
         bias.numel() <= kernels::kMaxGeluCols;
}

bool TakesNorm(at::ScalarType act, const at::Tensor& bias, const at::Tensor& gamma) {
  return bias.is_cuda() && gamma.device() == bias.device() && Takes(act) &&
         Takes(gamma.scalar_type()) && bias.scalar_type() == gamma.scalar_type() &&
         bias.numel() > 0 && bias.numel() <= kernels::kMaxNormCols;
}

at::Tensor BiasGeluForward(const at::Tensor& y, const at::Tensor& bias) {
  const c10::cuda::CUDAGuard guard(y.device());
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const at::Tensor b = bias.contiguous();
  at::Tensor out = at::empty_like(y);
  Check(kernels::BiasGeluForward(y.data_ptr(), b.data_ptr(), out.data_ptr(), rows, cols,
                                 TypeOf(y.scalar_type()), TypeOf(b.scalar_type()), StreamOf(y)),
        "BiasGeluForward");
  return out;
}

std::tuple<at::Tensor, at::Tensor> BiasGeluBackward(const at::Tensor& grad, const at::Tensor& y,
                                                    const at::Tensor& bias) {
  const c10::cuda::CUDAGuard guard(y.device());
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const at::Tensor g = grad.to(y.scalar_type()).contiguous();
  const at::Tensor b = bias.contiguous();
  at::Tensor dy = at::empty_like(y);
  at::Tensor partials =
      at::empty({kernels::ColumnBlocks(rows), cols}, y.options().dtype(at::kFloat));
  Check(kernels::BiasGeluBackward(g.data_ptr(), y.data_ptr(), b.data_ptr(), dy.data_ptr(),
                                  partials.data_ptr<float>(), rows, cols,
                                  TypeOf(y.scalar_type()), TypeOf(b.scalar_type()), StreamOf(y)),
        "BiasGeluBackward");
  return {dy, SumPartials(partials, b.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormForward(
    const at::Tensor& y, const at::Tensor& bias, const at::Tensor& residual,
    const at::Tensor& gamma, const at::Tensor& beta, const kernels::DropoutBits& bits,
    double scale, double eps) {
  const c10::cuda::CUDAGuard guard(y.device());
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const at::ScalarType param = gamma.scalar_type();
  TORCH_CHECK(residual.numel() == y.numel() && residual.size(-1) == cols,
              "fused layers: the residual has ", residual.sizes(), ", y ", y.sizes());
  const at::Tensor r = residual.to(param).contiguous();
  const at::Tensor b = bias.contiguous(), w = gamma.contiguous(), c = beta.to(param).contiguous();
  at::Tensor z = at::empty(y.sizes(), y.options().dtype(param));
  at::Tensor out = at::empty_like(z);
  at::Tensor mean = at::empty({rows}, y.options().dtype(at::kFloat));
  at::Tensor rstd = at::empty_like(mean);
  const kernels::NormForward args{y.data_ptr(),  b.data_ptr(), r.data_ptr(),
                                  w.data_ptr(),  c.data_ptr(), z.data_ptr(),
                                  out.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>()};
  Check(kernels::BiasDropoutAddNormForward(args, rows, cols, bits, static_cast<float>(scale),
                                           static_cast<float>(eps), TypeOf(y.scalar_type()),
                                           TypeOf(param), StreamOf(y)),
        "BiasDropoutAddNormForward");
  return {out, z, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormBackward(
    const at::Tensor& grad, const at::Tensor& z, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& gamma, const kernels::DropoutBits& bits, double scale,
    at::ScalarType y_dtype) {
  const c10::cuda::CUDAGuard guard(z.device());
  const int64_t cols = z.size(-1), rows = z.numel() / cols;
  const at::ScalarType param = gamma.scalar_type();
  const at::Tensor g = grad.to(param).contiguous();
  const at::Tensor w = gamma.contiguous();
  at::Tensor dz = at::empty_like(z);
  at::Tensor dy = at::empty(z.sizes(), z.options().dtype(y_dtype));
  at::Tensor partials =
      at::empty({3, kernels::ColumnBlocks(rows), cols}, z.options().dtype(at::kFloat));
  const kernels::NormBackward args{g.data_ptr(),
                                   z.data_ptr(),
                                   mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(),
                                   w.data_ptr(),
                                   dz.data_ptr(),
                                   dy.data_ptr(),
                                   partials[0].data_ptr<float>(),
                                   partials[1].data_ptr<float>(),
                                   partials[2].data_ptr<float>()};
  Check(kernels::BiasDropoutAddNormBackward(args, rows, cols, bits, static_cast<float>(scale),
                                            TypeOf(y_dtype), TypeOf(param), StreamOf(z)),
        "BiasDropoutAddNormBackward");
  const at::Tensor sums = partials.sum(1).to(param);  // [3, cols]
  return {dz, dy, sums[0], sums[1], sums[2]};
}

}  // namespace pbert::model::fused_kernels
