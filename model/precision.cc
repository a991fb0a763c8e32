#include "model/precision.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"
#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"

namespace pbert::model {

const absl::Status& CpuRunsBf16() {
  static const absl::Status status = [] {
    try {
      AutocastGuard guard(Precision::kBf16, c10::DeviceType::CPU);
      // As the model computes, with shapes large enough that LibTorch hands
      // them to oneDNN: a linear layer on [rows, tokens, hidden] (mm with a
      // transposed weight) and attention scores (bmm).
      // Constants: the probe leaves the random generator as it was.
      at::Tensor x = at::ones({4, 32, 128});
      at::Tensor w = at::full({128, 128}, 0.01).requires_grad_();
      at::Tensor y = at::linear(x, w, at::zeros({128}));
      at::Tensor scores = at::matmul(y, y.transpose(1, 2));
      scores.sum().backward();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::FailedPreconditionError(FirstLine(e));
    }
  }();
  return status;
}

absl::StatusOr<Precision> ResolvePrecision(Precision precision, const c10::Device& device) {
  const bool cuda = device.is_cuda();
  switch (precision) {
    case Precision::kAuto:
      if (cuda) {
        // bf16 needs no loss scaling; GPUs before Ampere (sm_80) lack it.
        auto facts = gpu::Describe(device.index());
        return facts.ok() && facts->major >= 8 ? Precision::kBf16 : Precision::kFp16;
      }
      if (!Cpu().bf16()) return Precision::kFp32;
      if (const absl::Status& bf16 = CpuRunsBf16(); !bf16.ok()) {
        logging::Get("model")->warn(
            "model.precision auto: this CPU has bf16 instructions but LibTorch cannot run bf16 "
            "here ({}); training in fp32",
            std::string(bf16.message()));
        return Precision::kFp32;
      }
      return Precision::kBf16;
    case Precision::kFp16:
      if (!cuda) {
        return absl::InvalidArgumentError(
            "model.precision fp16 needs a CUDA device; on a CPU use auto, fp32 or bf16");
      }
      break;
    case Precision::kBf16:
    case Precision::kFp8:
      if (!cuda) {
        if (const absl::Status& bf16 = CpuRunsBf16(); !bf16.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("model.precision ", NameOf(precision),
                           ": LibTorch cannot run bf16 on this CPU (", bf16.message(),
                           "); use auto or fp32"));
        }
      }
      break;
    case Precision::kFp32:
      break;
  }
  return precision;
}

AutocastGuard::AutocastGuard(Precision precision, c10::DeviceType device) : device_(device) {
  if (precision == Precision::kFp32 || precision == Precision::kAuto) return;
  active_ = true;
  was_enabled_ = torch_compat::AutocastEnabled(device_);
  previous_dtype_ = torch_compat::AutocastDtype(device_);
  torch_compat::SetAutocastDtype(device_, Bf16Autocast(precision) ? at::kBFloat16 : at::kHalf);
  torch_compat::SetAutocastEnabled(device_, true);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Casts are cached while autocast is on; leaving the outermost region
  // must drop them or they would outlive the weights they were made from.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  torch_compat::SetAutocastEnabled(device_, was_enabled_);
  torch_compat::SetAutocastDtype(device_, previous_dtype_);
}

at::Tensor LossScaler::Scale(const at::Tensor& loss) const { return loss * scale_; }

at::Tensor LossScaler::Unscale(const std::vector<at::Tensor>& parameters) const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> finite;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    p.grad().div_(scale_);
    finite.push_back(p.grad().isfinite().all());
  }
  if (finite.empty()) return at::ones({}, at::kBool);
  return at::stack(finite).all();
}

void LossScaler::Update(bool finite) {
  if (!finite) {
    scale_ = std::max(1.0, scale_ / 2.0);
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ *= 2.0;
    good_steps_ = 0;
  }
}

}  // namespace pbert::model
