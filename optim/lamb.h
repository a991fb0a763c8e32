// LAMB (You et al., "Large Batch Optimization for Deep Learning"), the
// optimizer of MLPerf BERT, in LibTorch's optimizer style.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>

#include <string>
#include <tuple>
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
    using config::Above;
    using config::AtLeast;
    using config::InRange;
    v.Field("beta1", &std::get<0>(betas_), "LAMB first-moment decay (before packing adjustment)",
            InRange(0.0, 0.999999));
    v.Field("beta2", &std::get<1>(betas_), "LAMB second-moment decay (before packing adjustment)",
            InRange(0.0, 0.999999));
    v.Field("eps", &eps_, "added to sqrt(v); above 0, or a parameter without gradient becomes 0/0",
            Above(0.0));
    v.Field("weight_decay", &weight_decay_, "decoupled weight decay (not on bias, LayerNorm)",
            AtLeast(0.0));
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
class Lamb : public torch::optim::Optimizer {
 public:
  explicit Lamb(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                LambOptions defaults = {});
  explicit Lamb(std::vector<torch::Tensor> params, LambOptions defaults = {})
      : Lamb({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

// Two groups as BERT trains: parameters whose name contains "bias" or
// "LayerNorm" get no weight decay (and, with `exclude_from_trust_ratio`, no
// layer adaptation either); all others get `options` as given.
std::vector<torch::optim::OptimizerParamGroup> BertParamGroups(
    const torch::OrderedDict<std::string, torch::Tensor>& named_parameters,
    const LambOptions& options, bool exclude_from_trust_ratio);

// The L2 norm of all gradients together, accumulated in double precision
// whatever the gradients' dtype: a 0-dim double tensor on their device,
// not read from it.
torch::Tensor GlobalGradNorm(const std::vector<torch::Tensor>& parameters);

// Scales all gradients so that their global L2 norm (GlobalGradNorm) is at
// most `max_norm` (no limit if <= 0) and returns the norm before scaling.
// The coefficient, min(1, max_norm / norm), is computed on the device, so
// clipping reads nothing from it: every gradient is multiplied by it, by 1
// when the norm is within the limit (an exact identity).
torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace pbert::optim
