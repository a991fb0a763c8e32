#include "model/precision.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "absl/strings/str_cat.h"
#include "common/platform.h"
#include "common/torch_compat.h"

namespace pbert::model {

std::vector<std::string> PrecisionNames() { return {"auto", "fp32", "bf16", "fp16"}; }

Precision AutoPrecision(c10::DeviceType device) {
  if (device == c10::DeviceType::CUDA) return Precision::kFp16;
  return Cpu().bf16() ? Precision::kBf16 : Precision::kFp32;
}

std::string PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

absl::StatusOr<Precision> ParsePrecision(const std::string& name, c10::DeviceType device) {
  if (name == "auto") return AutoPrecision(device);
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") {
    if (device != c10::DeviceType::CUDA) {
      return absl::InvalidArgumentError(
          "model.precision fp16 needs a CUDA device; use fp32 (fastest on CPU) or bf16");
    }
    return Precision::kFp16;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.precision '", name, "' is not one of: auto, fp32, bf16, fp16"));
}

AutocastGuard::AutocastGuard(Precision precision, c10::DeviceType device) : device_(device) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  was_enabled_ = torch_compat::AutocastEnabled(device_);
  previous_dtype_ = torch_compat::AutocastDtype(device_);
  torch_compat::SetAutocastDtype(device_, precision == Precision::kBf16 ? at::kBFloat16 : at::kHalf);
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

bool LossScaler::Unscale(const std::vector<at::Tensor>& parameters) const {
  at::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    p.grad().div_(scale_);
    if (!p.grad().isfinite().all().item<bool>()) finite = false;
  }
  return finite;
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
