// The fused layers' kernel side for ATen tensors (model/fused_layers_kernels.h),
// one code for the CUDA kernels and their CPU twins: the tensors checked,
// the outputs and the column partials allocated on the tensors' device, the
// operation launched where they are (kernels/layer_cpu.h on the CPU,
// fused_kernels::cuda on a GPU), the partials summed.
#include <ATen/ATen.h>

#include <atomic>

#include "kernels/layer_cpu.h"
#include "model/fused_layers_kernels.h"

namespace pbert::model::fused_kernels {
namespace {

std::atomic<bool> twins_on_cpu{false};

bool Takes(at::ScalarType type) { return type == at::kFloat || type == at::kBFloat16; }

kernels::ElementType TypeOf(at::ScalarType type) {
  return type == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat;
}

// Whether the operations run on `device`: the kernels on CUDA, the twins on
// the CPU where switched on.
bool RunsOn(const c10::Device& device) {
  return device.is_cuda() ? Built() : device.is_cpu() && TwinsOnCpu();
}

// Stops with what failed (a kernel's error, or a twin refusing rows wider
// than its kernel takes).
void Check(const std::string& failure, const char* what) {
  TORCH_CHECK(failure.empty(), "fused layers: ", what, ": ", failure);
}
std::string TwinOutcome(bool done) {
  return done ? "" : "the CPU twin refused the rows (wider than the kernel takes)";
}
int DeviceOf(const at::Tensor& t) { return t.device().index() < 0 ? 0 : t.device().index(); }

// The column partials' sum, in `type`.
at::Tensor SumPartials(const at::Tensor& partials, at::ScalarType type) {
  return partials.sum(0).to(type);
}

}  // namespace

bool TwinsOnCpu() { return twins_on_cpu.load(); }
void SetTwinsOnCpu(bool on) { twins_on_cpu.store(on); }

bool TakesGelu(at::ScalarType act, const at::Tensor& bias) {
  return RunsOn(bias.device()) && Takes(act) && Takes(bias.scalar_type()) && bias.numel() > 0 &&
         bias.numel() <= kernels::kMaxGeluCols;
}

bool TakesNorm(at::ScalarType act, const at::Tensor& bias, const at::Tensor& gamma) {
  return RunsOn(bias.device()) && gamma.device() == bias.device() && Takes(act) &&
         Takes(gamma.scalar_type()) && bias.scalar_type() == gamma.scalar_type() &&
         bias.numel() > 0 && bias.numel() <= kernels::kMaxNormCols;
}

at::Tensor BiasGeluForward(const at::Tensor& y, const at::Tensor& bias) {
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const at::Tensor b = bias.contiguous();
  at::Tensor out = at::empty_like(y);
  const auto act = TypeOf(y.scalar_type()), param = TypeOf(b.scalar_type());
  Check(y.is_cpu() ? TwinOutcome(kernels::cpu::BiasGeluForward(y.data_ptr(), b.data_ptr(),
                                                                out.data_ptr(), rows, cols, act,
                                                                param))
                   : cuda::BiasGeluForward(DeviceOf(y), y.data_ptr(), b.data_ptr(),
                                           out.data_ptr(), rows, cols, act, param),
        "BiasGeluForward");
  return out;
}

std::tuple<at::Tensor, at::Tensor> BiasGeluBackward(const at::Tensor& grad, const at::Tensor& y,
                                                    const at::Tensor& bias) {
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const at::Tensor g = grad.to(y.scalar_type()).contiguous();
  const at::Tensor b = bias.contiguous();
  at::Tensor dy = at::empty_like(y);
  at::Tensor partials =
      at::empty({kernels::ColumnBlocks(rows), cols}, y.options().dtype(at::kFloat));
  const auto act = TypeOf(y.scalar_type()), param = TypeOf(b.scalar_type());
  Check(y.is_cpu()
            ? TwinOutcome(kernels::cpu::BiasGeluBackward(g.data_ptr(), y.data_ptr(), b.data_ptr(),
                                                         dy.data_ptr(), partials.data_ptr<float>(),
                                                         rows, cols, act, param))
            : cuda::BiasGeluBackward(DeviceOf(y), g.data_ptr(), y.data_ptr(), b.data_ptr(),
                                     dy.data_ptr(), partials.data_ptr<float>(), rows, cols, act,
                                     param),
        "BiasGeluBackward");
  return {dy, SumPartials(partials, b.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormForward(
    const at::Tensor& y, const at::Tensor& bias, const at::Tensor& residual,
    const at::Tensor& gamma, const at::Tensor& beta, const kernels::DropoutBits& bits,
    double scale, double eps) {
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
  const auto act = TypeOf(y.scalar_type()), type = TypeOf(param);
  const float s = static_cast<float>(scale), e = static_cast<float>(eps);
  Check(y.is_cpu() ? TwinOutcome(kernels::cpu::BiasDropoutAddNormForward(args, rows, cols, bits, s,
                                                                          e, act, type))
                   : cuda::NormForward(DeviceOf(y), args, rows, cols, bits, s, e, act, type),
        "BiasDropoutAddNormForward");
  return {out, z, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> NormBackward(
    const at::Tensor& grad, const at::Tensor& z, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& gamma, const kernels::DropoutBits& bits, double scale,
    at::ScalarType y_dtype) {
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
  const auto act = TypeOf(y_dtype), type = TypeOf(param);
  const float s = static_cast<float>(scale);
  Check(z.is_cpu() ? TwinOutcome(kernels::cpu::BiasDropoutAddNormBackward(args, rows, cols, bits,
                                                                           s, act, type))
                   : cuda::NormBackward(DeviceOf(z), args, rows, cols, bits, s, act, type),
        "BiasDropoutAddNormBackward");
  const at::Tensor sums = partials.sum(1).to(param);  // [3, cols]
  return {dz, dy, sums[0], sums[1], sums[2]};
}

}  // namespace pbert::model::fused_kernels
