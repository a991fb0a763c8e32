// Mixed precision: autocast regions with fp32 master weights, and dynamic
// loss scaling for fp16. On CPU, bf16 autocast is faster than fp32 where the
// CPU computes bf16 in hardware (AVX512_BF16 or AMX) and many times slower
// where it does not (bench/model), so "auto" picks bf16 only on such CPUs,
// detected at run time; fp16 needs CUDA.
// The CUDA paths compile everywhere but are untested on this project's
// CPU-only machines.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/choices.h"
#include "nlohmann/json.hpp"

namespace pbert::model {

// kFp8: the encoder's linear layers in FP8 (model/fp8.h), the rest as kBf16.
enum class Precision { kAuto, kFp32, kBf16, kFp16, kFp8 };
inline constexpr Choice<Precision> kPrecisions[] = {{"auto", Precision::kAuto},
                                                    {"fp32", Precision::kFp32},
                                                    {"bf16", Precision::kBf16},
                                                    {"fp16", Precision::kFp16},
                                                    {"fp8", Precision::kFp8}};
constexpr ChoiceList<Precision> ChoicesOf(Precision) { return kPrecisions; }

// Whether the model runs under bf16 autocast: bf16, and fp8 outside the
// encoder's products.
constexpr bool Bf16Autocast(Precision precision) {
  return precision == Precision::kBf16 || precision == Precision::kFp8;
}

// What `precision` means on `device`, never kAuto. Auto: on CPU bf16 where
// the CPU has AVX512_BF16 or AMX-BF16, else fp32; on CUDA bf16 from Ampere
// (sm_80) on, fp16 with dynamic loss scaling before.
// fp16 on CPU is an error that says what to use.
// bf16 on CPU (asked for, or picked by auto) must also run: a bf16 product
// forward and backward is tried once, since the CPU may have the
// instructions while LibTorch's oneDNN is not allowed them
// (ONEDNN_MAX_CPU_ISA); auto then falls back to fp32 with a warning, bf16 is
// an error naming the key. fp8 needs bf16 for the rest of the model, and
// CheckFp8 (model/fp8.h) for its products.
absl::StatusOr<Precision> ResolvePrecision(Precision precision, const c10::Device& device);

// OK if bf16 autocast runs on this CPU (tried once, then remembered); else
// the first line of LibTorch's error.
const absl::Status& CpuRunsBf16();

// Runs its scope under autocast for `device` (nothing for fp32; bf16 for
// fp8, whose encoder products are fp8 of their own); parameters
// stay fp32, so the optimizer updates fp32 master weights.
class AutocastGuard {
 public:
  AutocastGuard(Precision precision, c10::DeviceType device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

// Dynamic loss scaling for fp16: the loss is multiplied by the scale before
// backward; gradients are divided by it before the step, which is skipped
// (and the scale halved) if any gradient is not finite; after
// `growth_interval` good steps in a row the scale doubles.
struct LossScalerState {
  double scale = 65536.0;
  int good_steps = 0;  // finite steps since the scale last changed
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(LossScalerState, scale, good_steps)
};

class LossScaler {
 public:
  explicit LossScaler(double initial_scale = 65536.0, int growth_interval = 2000)
      : scale_(initial_scale), growth_interval_(growth_interval) {}

  double scale() const { return scale_; }
  at::Tensor Scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale; returns a 0-dim bool tensor on
  // their device, false if any is inf or NaN (then the optimizer step must
  // be skipped), without reading it.
  at::Tensor Unscale(const std::vector<at::Tensor>& parameters) const;
  // Adjusts the scale after a step that was (or was not) finite.
  void Update(bool finite);
  // For checkpoints.
  LossScalerState State() const { return {scale_, good_steps_}; }
  void Restore(const LossScalerState& state) {
    scale_ = state.scale;
    good_steps_ = state.good_steps;
  }

 private:
  double scale_;
  int growth_interval_;
  int good_steps_ = 0;
};

}  // namespace pbert::model
