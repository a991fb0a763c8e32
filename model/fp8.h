// FP8 matrix products for the encoder (model.precision fp8). Each of a
// layer's linear layers (QKV, attention output, intermediate, output)
// multiplies e4m3 inputs by e4m3 weights forward, and e5m2 output gradients
// by them backward, as NVIDIA's MLPerf BERT does with Transformer Engine's
// HYBRID format. The heads, LayerNorm, attention and the residual stream
// run in bf16 autocast; the weights stay fp32 (or bf16 copies of fp32
// masters, model.master_weights), and LAMB updates fp32.
//
// Every quantized tensor has a scale of its own, per product and role
// (input, weight, output gradient): the tensor times its scale, saturated
// to the format's largest value (448 in e4m3, 57344 in e5m2) and rounded
// to the nearest value of the format, ties to even. The scales are delayed
// (Transformer Engine's delayed scaling): a step quantizes with the scales
// the steps before it left, while it records each tensor's largest
// magnitude over its micro-batches (and, before the update, over the ranks:
// every rank then holds the same scales). After the step each product's
// maxima enter its history (amax_history steps long, newest first) and
//
//   scale = format max / max(history) / 2^margin
//
// unless max(history) is 0 or that scale is not finite, where the scale
// stays as it was (the first scale is 1). A maximum that is not finite
// (an inf or NaN in the tensor: the trainer skips such a step, its loss or
// gradients not finite) enters the history as 0, so that one bad step
// leaves the scales as they were rather than holding them for the
// history's length.
//
// Two implementations of one product: at::_scaled_mm, on GPUs with FP8
// products (compute capability 8.9 and later; LibTorch 2.4 and later), and
// an emulation (model.fp8_emulation) that quantizes the same way, multiplies
// the quantized values in fp32 and then applies the two inverse scales, as
// _scaled_mm does: the CPU's tests and learning curves. Both need the
// float8 dtypes of LibTorch 2.1 and later; 1.13 refuses fp8.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/config_field.h"
#include "kernels/fp8_math.h"
#include "model/precision.h"
#include "nlohmann/json.hpp"

namespace pbert::model {

struct BertOptions;

// The two formats (e4m3fn and e5m2), one definition with the kernels'.
using Fp8Format = kernels::Fp8Kind;
// The format's largest finite value: 448 (e4m3), 57344 (e5m2).
double Fp8Max(Fp8Format format);

// Whether this LibTorch has the float8 dtypes (2.1 and later).
bool Fp8Built();

// The config's fp8 keys, in the model section.
struct Fp8Options {
  // NVIDIA's MLPerf BERT's length (Transformer Engine's default is 1024):
  // each scale from the step before's largest magnitude.
  int64_t amax_history = 1;
  int64_t margin = 0;
  bool emulation = false;

  template <class V>
  void Visit(V& v) {
    v.Field("fp8_amax_history", &amax_history,
            "with precision fp8: steps of largest magnitudes each scale is taken from",
            config::InRange<int64_t>(1, 1 << 16));
    v.Field("fp8_margin", &margin,
            "with precision fp8: each scale divided by 2^margin, headroom above the history's "
            "largest magnitude",
            config::InRange<int64_t>(0, 64));
    v.Field("fp8_emulation", &emulation,
            "with precision fp8: quantize as on a GPU, multiply in fp32 (any device, slow: the "
            "CPU's tests and learning curves); false: FP8 products, on GPUs of compute "
            "capability 8.9 and later");
  }
  // These keys, named idle in a run whose precision (resolved) is not fp8.
  void Inactive(Precision precision, config::InactiveKeys* keys) const;
};

// OK if the encoder of `bert` can compute in fp8 on `device` as `options`
// ask; else InvalidArgument naming model.precision (or the key at fault):
// a LibTorch without float8 dtypes, a CPU or a GPU below compute
// capability 8.9 without emulation, a width _scaled_mm does not take.
absl::Status CheckFp8(const Fp8Options& options, const BertOptions& bert,
                      const c10::Device& device);

// The quantized tensors of a product, the columns of the scaling state.
enum Fp8Role : int64_t { kFp8Input = 0, kFp8Weight = 1, kFp8GradOutput = 2 };
inline constexpr int64_t kFp8Roles = 3;
// The format of each role: e4m3, e4m3, e5m2.
Fp8Format FormatOf(Fp8Role role);

// A product's weight as cast to e4m3 (with its transpose and inverse
// scale) by the first micro-batch of a step and taken by the others: a
// weight and its scale change only between steps (the optimizer, then
// Fp8Scaling::Update), so the cast is the same bytes. Kept while the weight
// is the one it was cast from (storage, version, sizes and dtype: a
// parameter changed in place is cast again; one QKV product's joined weight
// is new in each micro-batch and changes with the step), the scaling at the
// same step, and its largest magnitude recorded where the product records.
struct Fp8WeightCast {
  at::Tensor q, q_t, inv;
  const void* data = nullptr;
  int64_t version = -1;
  std::vector<int64_t> sizes;
  c10::ScalarType type = c10::ScalarType::Undefined;
  int64_t step = -1;
  bool recorded = false;
};

// One product's part of the scaling state (rows of Fp8Scaling's tensors).
struct Fp8Slot {
  at::Tensor scale;  // [3] fp32, by role
  at::Tensor amax;   // [3] fp32: the step's largest magnitudes so far
  bool emulate = false;
  // The weight's cast kept for the step (null: cast in every micro-batch)
  // and the scaling's step count it is checked against.
  Fp8WeightCast* weight_cast = nullptr;
  const int64_t* step = nullptr;
};

// The tensors cast by fp8 products in this process so far, by role (Fp8Role):
// a step of M micro-batches casts each product's input and output gradient
// M times and its weight once. For tests and profiles.
std::array<int64_t, 3> Fp8CastsSoFar();

// The scaling state as checkpoints keep it (trainer_state.json, part
// "fp8"): the scales and the histories, as little-endian fp32 in base64.
struct Fp8ScalingState {
  int64_t products = 0;
  int64_t history = 0;
  std::vector<float> scale;         // [products, 3]
  std::vector<float> amax_history;  // [history, products, 3], newest first
};
void to_json(nlohmann::json& json, const Fp8ScalingState& state);
void from_json(const nlohmann::json& json, Fp8ScalingState& state);

// The scales, maxima and histories of `products` products, on `device`.
class Fp8Scaling {
 public:
  Fp8Scaling(int64_t products, const Fp8Options& options, const c10::Device& device);
  // Its slots point into it.
  Fp8Scaling(const Fp8Scaling&) = delete;
  Fp8Scaling& operator=(const Fp8Scaling&) = delete;

  // Whether the slots taken after this keep each weight's cast for the
  // step (Fp8WeightCast; by default they do). A captured step casts in
  // every micro-batch: its replays run only the kernels it recorded.
  void KeepWeightCasts(bool keep) { keep_weight_casts_ = keep; }

  int64_t products() const { return scale_.size(0); }
  Fp8Slot Slot(int64_t product) const;
  // [products, 3]: this step's largest magnitudes; the trainer takes their
  // maximum over the ranks (in place) before Update.
  const at::Tensor& amax() const { return amax_; }
  const at::Tensor& scale() const { return scale_; }
  const at::Tensor& history() const { return history_; }
  // After a step: its maxima into the history, the scales from it, the
  // maxima back to 0, the weights' kept casts stale. On the device, nothing
  // read.
  void Update();

  // For checkpoints. Restore refuses (InvalidArgument) a state of another
  // shape: another model or amax history.
  Fp8ScalingState State() const;
  absl::Status Restore(const Fp8ScalingState& state);

 private:
  Fp8Options options_;
  at::Tensor scale_;    // [P, 3]
  at::Tensor amax_;     // [P, 3]
  at::Tensor history_;  // [H, P, 3], newest first
  at::Tensor max_;      // [3]: each role's format max
  // Steps updated or restored: a weight cast at another is cast again.
  int64_t step_ = 0;
  bool keep_weight_casts_ = true;
  mutable std::vector<Fp8WeightCast> weight_casts_;  // [P]
};

// Whether a, b, their scales and the bias are what at::_scaled_mm takes
// (PyTorch 2.4-2.11's checks, tensor-wise scaling): float8 matrices, not
// both e5m2; a [M, K] row-major and b [K, N] column-major, every size a
// multiple of 16; each scale one fp32 value; a bias only with a bf16 or
// fp16 output, [N] in its dtype. Both paths of every fp8 product check
// their operands with it, so the emulation's tests prove what the GPU gets.
absl::Status CheckScaledMmOperands(const at::Tensor& a, const at::Tensor& b,
                                   const at::Tensor& scale_a, const at::Tensor& scale_b,
                                   const at::Tensor& bias, at::ScalarType out);

// x * scale (0-dim fp32) saturated to +-Fp8Max and rounded to `format`: a
// tensor of the float8 dtype (needs Fp8Built()).
at::Tensor QuantizeFp8(const at::Tensor& x, const at::Tensor& scale, Fp8Format format);

// x w^T + b (bias undefined: none) over x's last dimension, as above, in
// the product's dtype (autocast's, or x's); differentiable in x, weight
// and bias. `record`: the input's, weight's and (backward) output
// gradient's largest magnitudes go into slot.amax (training; evaluation
// leaves the state as it is).
// weight_version: the weight's version for its kept cast (Fp8WeightCast),
// by default weight._version(); a weight joined anew in each micro-batch
// passes its parts' (one QKV product).
at::Tensor Fp8Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const Fp8Slot& slot, bool record, int64_t weight_version = -1);

}  // namespace pbert::model
