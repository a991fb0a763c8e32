// LAMB (You et al., "Large Batch Optimization for Deep Learning"), the
// optimizer of MLPerf BERT, in LibTorch's optimizer style.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/config_field.h"

namespace pbert::optim {


struct LambOptions : public torch::optim::OptimizerCloneableOptions<LambOptions> {
  LambOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor): as AdamOptions
  /// Learning rate; the schedule sets it before each step.
  TORCH_ARG(double, lr) = 1e-3;
  typedef std::tuple<double, double> betas_t;
  /// Decay rates of the first and second moment estimates.
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  /// Added to the root of the second moment for numerical stability.
  TORCH_ARG(double, eps) = 1e-6;
  /// Decoupled weight decay, added to the update before the trust ratio.
  TORCH_ARG(double, weight_decay) = 0.01;
  /// Divide the moments by (1 - beta^t); MLPerf BERT configs use both ways.
  TORCH_ARG(bool, bias_correction) = true;
  /// Scale the update by ||w|| / ||update|| (layer adaptation); off gives
  /// AdamW for this group.
  TORCH_ARG(bool, trust_ratio) = true;

 public:
  // The config's optim keys of LAMB (the rate comes from the schedule).
  template <class V>
  void Visit(V& v) {
    using config::InRange;
    v.Field("beta1", &std::get<0>(betas_), "LAMB first-moment decay (before packing adjustment)",
            InRange(0.0, 0.999999));
    v.Field("beta2", &std::get<1>(betas_), "LAMB second-moment decay (before packing adjustment)",
            InRange(0.0, 0.999999));
    v.Field("eps", &eps_, "added to sqrt(v); above 0, or a parameter without gradient becomes 0/0",
            InRange(1e-30, 1.0));
    v.Field("weight_decay", &weight_decay_, "decoupled weight decay (not on bias, LayerNorm)",
            InRange(0.0, 1.0));
    v.Field("bias_correction", &bias_correction_, "divide moments by 1 - beta^t");
  }

  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const LambOptions& lhs, const LambOptions& rhs);
  double get_lr() const override;
  void set_lr(const double lr) override;
};

struct LambParamState : public torch::optim::OptimizerCloneableParamState<LambParamState> {
  /// Updates applied to this parameter so far.
  TORCH_ARG(int64_t, step) = 0;
  /// First moment estimate m.
  TORCH_ARG(torch::Tensor, exp_avg);
  /// Second moment estimate v.
  TORCH_ARG(torch::Tensor, exp_avg_sq);

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const LambParamState& lhs, const LambParamState& rhs);
};

// For each parameter w with gradient g (clipped beforehand, see
// ClipGradNorm):
//   m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
//   u = m' / (sqrt(v') + eps) + weight_decay w   (m', v': bias-corrected or not)
//   r = ||w|| / ||u||  (1 if either norm is 0, or trust_ratio is off)
//   w = w - lr r u
// computed for all parameters of a group at once with LibTorch's
// multi-tensor _foreach_ operations, on any device (on CUDA a few kernel
// launches for all parameters; on the CPU ATen's vectorised kernels, about
// 0.7x the time of a per-parameter fused loop: bench/optimizer), each
// parameter with its own trust ratio. No value goes to the host.
//
// Beside the options of each group, how a step runs (none of it part of
// the checkpoint):
// - Master weights (BindModelWeights): where the model computes with bf16
//   weights, the optimizer's parameters are fp32 master weights; each
//   steps with its bf16 copy's gradient and writes the copy after the step.
// - Gradient scaling (ScaleGradients): clipping's coefficient, a 0-dim
//   tensor on the device, multiplies every gradient in the next step, so
//   that clipping costs no pass of its own and reads nothing back.
// - Fused kernels (UseFusedKernels): on a CUDA device the step runs the
//   fused multi-tensor kernels of kernels/lamb_cuda.h (two launches per
//   pass over chunked lists, about 40 bytes of memory traffic per
//   parameter, against about 180 for the _foreach operations), where every
//   parameter of a group has taken as many steps; elsewhere, and on the
//   CPU always, the _foreach operations above.
// What Lamb::load throws for a saved state that does not fit the
// parameters (another model config's), apart from an unreadable archive.
struct StateMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Lamb : public torch::optim::Optimizer {
 public:
  explicit Lamb(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                LambOptions defaults = {});
  explicit Lamb(std::vector<torch::Tensor> params, LambOptions defaults = {})
      : Lamb({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  // Moments saved for fewer leading rows (an unpadded vocabulary) get
  // zero rows; a state of any other shape throws StateMismatch.
  void load(torch::serialize::InputArchive& archive) override;

  // Each pair: a parameter of this optimizer (an fp32 master weight) and
  // the model's copy of it (bf16, the same shape), whose gradient the
  // parameter steps with and which receives the updated weight.
  void BindModelWeights(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs);
  // The next step multiplies every gradient by `coefficient` (a 0-dim
  // tensor on the gradients' device) first; undefined: by nothing.
  void ScaleGradients(torch::Tensor coefficient) { grad_scale_ = std::move(coefficient); }
  void UseFusedKernels(bool fused) { fused_ = fused; }
  bool fused() const { return fused_; }
  // How the last step ran: "fused" or "foreach" (tests and benchmarks).
  const char* last_path() const { return last_path_; }

 private:
  // The model's copy of parameter `p`, or an undefined tensor.
  torch::Tensor ModelCopyOf(const torch::Tensor& p) const;

  // Each bound master weight's model copy, by the master's tensor.
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> bound_;
  torch::Tensor grad_scale_;
  bool fused_ = false;
  const char* last_path_ = "";
};

// The clipping coefficient min(1, max_norm / norm) for the global norm
// `norm` (GlobalGradNorm), on its device; undefined when max_norm <= 0
// (no limit).
torch::Tensor ClipCoefficient(const torch::Tensor& norm, double max_norm);

// Two groups as BERT trains: parameters whose name contains "bias" or
// "LayerNorm" get no weight decay (and, with `exclude_from_trust_ratio`, no
// layer adaptation either); all others get `options` as given.
std::vector<torch::optim::OptimizerParamGroup> BertParamGroups(
    const torch::OrderedDict<std::string, torch::Tensor>& named_parameters,
    const LambOptions& options, bool exclude_from_trust_ratio);

// The L2 norm of all gradients together, accumulated in double precision
// whatever the gradients' dtype: a 0-dim double tensor on their device,
// not read from it. With `fused`, on CUDA one pass of the fused kernel
// (optim/lamb_fused.h) where the gradients allow it.
torch::Tensor GlobalGradNorm(const std::vector<torch::Tensor>& parameters, bool fused = false);

// Scales all gradients so that their global L2 norm (GlobalGradNorm) is at
// most `max_norm` (no limit if <= 0) and returns the norm before scaling.
// The coefficient, min(1, max_norm / norm), is computed on the device, so
// clipping reads nothing from it: every gradient is multiplied by it, by 1
// when the norm is within the limit (an exact identity).
torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace pbert::optim
