#include "optim/lamb.h"

#include <ATen/ATen.h>
#include <torch/optim/serialize.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common/torch_compat.h"
#include "common/torch_compat_ops.h"
#include "kernels/lamb_ops.h"
#include "optim/lamb_fused.h"

namespace pbert::optim {

LambOptions::LambOptions(double lr) : lr_(lr) {}

bool operator==(const LambOptions& lhs, const LambOptions& rhs) {
  return lhs.lr() == rhs.lr() && lhs.betas() == rhs.betas() && lhs.eps() == rhs.eps() &&
         lhs.weight_decay() == rhs.weight_decay() &&
         lhs.bias_correction() == rhs.bias_correction() && lhs.trust_ratio() == rhs.trust_ratio();
}

void LambOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(betas);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(bias_correction);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_ratio);
}

void LambOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(betas_t, betas);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, bias_correction);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, trust_ratio);
}

double LambOptions::get_lr() const { return lr(); }

void LambOptions::set_lr(const double lr) { this->lr(lr); }

bool operator==(const LambParamState& lhs, const LambParamState& rhs) {
  return lhs.step() == rhs.step() && torch::equal(lhs.exp_avg(), rhs.exp_avg()) &&
         torch::equal(lhs.exp_avg_sq(), rhs.exp_avg_sq());
}

void LambParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
}

void LambParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
}

Lamb::Lamb(std::vector<torch::optim::OptimizerParamGroup> param_groups, LambOptions defaults)
    : Optimizer(param_groups, std::make_unique<LambOptions>(defaults)) {
  // Each group steps with exactly the options it came with. Since
  // pytorch/pytorch#165182 (after 2.11, whose run on a GPU machine passed
  // the golden tests; Debian's 2.14 has it) Optimizer's constructor merges
  // a group's options with the defaults for LibTorch's own optimizers only
  // and gives every group of any other optimizer the defaults' options:
  // BERT's biases and LayerNorms would be decayed and trust-ratio scaled.
  for (size_t i = 0; i < param_groups.size(); ++i) {
    if (param_groups[i].has_options()) {
      param_groups_[i].set_options(param_groups[i].options().clone());
    }
  }
  TORCH_CHECK(defaults.lr() >= 0, "Invalid learning rate: ", defaults.lr());
  TORCH_CHECK(defaults.eps() >= 0, "Invalid epsilon value: ", defaults.eps());
  auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(0 <= beta1 && beta1 < 1.0, "Invalid beta parameter at index 0: ", beta1);
  TORCH_CHECK(0 <= beta2 && beta2 < 1.0, "Invalid beta parameter at index 1: ", beta2);
  TORCH_CHECK(defaults.weight_decay() >= 0,
              "Invalid weight_decay value: ", defaults.weight_decay());
}

namespace {

// The tensors of one group's update, one entry per parameter with a
// gradient, and each parameter's bias corrections 1 - beta^t.
struct GroupTensors {
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq;
  std::vector<double> c1, c2;
};

std::vector<at::Scalar> Scalars(const std::vector<double>& values) {
  return std::vector<at::Scalar>(values.begin(), values.end());
}

// Each operation over all parameters of the group. The trust ratios stay
// on the device: no host synchronisation.
void Update(GroupTensors& t, const LambOptions& options) {
  const auto [beta1, beta2] = options.betas();
  at::_foreach_mul_(t.exp_avg, beta1);
  at::_foreach_add_(t.exp_avg, t.grads, 1 - beta1);
  at::_foreach_mul_(t.exp_avg_sq, beta2);
  at::_foreach_addcmul_(t.exp_avg_sq, t.grads, t.grads, 1 - beta2);
  std::vector<torch::Tensor> update = at::_foreach_div(t.exp_avg, Scalars(t.c1));
  {
    std::vector<torch::Tensor> denominator = at::_foreach_div(t.exp_avg_sq, Scalars(t.c2));
    at::_foreach_sqrt_(denominator);
    at::_foreach_add_(denominator, options.eps());
    at::_foreach_div_(update, denominator);
  }
  if (options.weight_decay() != 0) at::_foreach_add_(update, t.params, options.weight_decay());
  if (options.trust_ratio()) {
    const torch::Tensor w_norm = torch_compat::ForeachNorms(t.params);
    const torch::Tensor u_norm = torch_compat::ForeachNorms(update);
    const torch::Tensor ratio =
        torch::where(w_norm.gt(0).logical_and(u_norm.gt(0)), w_norm / u_norm,
                     torch::ones_like(w_norm))
            .to(t.params.front().scalar_type());
    // Each update by its own ratio, in one multi-tensor call.
    at::_foreach_mul_(update, ratio.unbind());
  }
  at::_foreach_add_(t.params, update, -options.lr());
}

// Whether the fused CUDA kernels can take this group's step: a CUDA build,
// every tensor on one CUDA device and dense, fp32 weights and moments, the
// gradients all fp32 or all bf16, bf16 copies if any, and every parameter
// at the same step (one bias correction for the group).
bool FusedLambRuns(const GroupTensors& t, const std::vector<torch::Tensor>& copies) {
  if (!FusedLambBuilt() || !t.params.front().is_cuda()) return false;
  const auto grad_type = t.grads.front().scalar_type();
  if (grad_type != at::kFloat && grad_type != at::kBFloat16) return false;
  for (size_t i = 0; i < t.params.size(); ++i) {
    const bool dense = t.params[i].is_contiguous() && t.grads[i].is_contiguous() &&
                       t.exp_avg[i].is_contiguous() && t.exp_avg_sq[i].is_contiguous();
    if (!dense || t.params[i].scalar_type() != at::kFloat ||
        t.grads[i].scalar_type() != grad_type || t.params[i].device() != t.grads[i].device() ||
        t.params[i].device() != t.params.front().device() || t.c1[i] != t.c1.front() ||
        t.c2[i] != t.c2.front()) {
      return false;
    }
    if (!copies.empty() &&
        (copies[i].scalar_type() != at::kBFloat16 || !copies[i].is_contiguous())) {
      return false;
    }
  }
  return true;
}

}  // namespace

torch::Tensor Lamb::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = {};
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const at::Tensor grad_scale = std::exchange(grad_scale_, at::Tensor());
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const LambOptions&>(group.options());
    auto [beta1, beta2] = options.betas();
    GroupTensors t;
    std::vector<torch::Tensor> copies;  // the model's bf16 copies, when bound
    for (auto& p : group.params()) {
      const torch::Tensor copy = ModelCopyOf(p);
      const torch::Tensor& grad = copy.defined() ? copy.grad() : p.grad();
      if (!grad.defined()) continue;
      TORCH_CHECK(!grad.is_sparse(), "Lamb does not support sparse gradients");
      auto key = torch_compat::OptimizerStateKey(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto state = std::make_unique<LambParamState>();
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(state)).first;
      }
      auto& state = static_cast<LambParamState&>(*it->second);
      state.step(state.step() + 1);
      const double step = static_cast<double>(state.step());
      t.params.push_back(p);
      t.grads.push_back(grad);
      if (copy.defined()) copies.push_back(copy);
      t.exp_avg.push_back(state.exp_avg());
      t.exp_avg_sq.push_back(state.exp_avg_sq());
      t.c1.push_back(options.bias_correction() ? 1 - std::pow(beta1, step) : 1.0);
      t.c2.push_back(options.bias_correction() ? 1 - std::pow(beta2, step) : 1.0);
    }
    if (t.params.empty()) continue;
    TORCH_CHECK(copies.empty() || copies.size() == t.params.size(),
                "Lamb: some parameters of a group have a bound model copy and some not");
    if (fused_ && FusedLambRuns(t, copies)) {
      FusedLambGroup fused{t.params, t.grads, t.exp_avg, t.exp_avg_sq, copies,
                           t.c1.front(), t.c2.front(), grad_scale};
      FusedLambStep(fused, options);
      last_path_ = "fused";
      continue;
    }
    if (!copies.empty()) {  // fp32 gradients for the fp32 arithmetic
      for (auto& g : t.grads) g = g.to(at::kFloat);
    }
    if (grad_scale.defined()) torch_compat::ForeachMulByTensor(t.grads, grad_scale);
    Update(t, options);
    if (!copies.empty()) torch_compat::ForeachCopy(copies, t.params);
    last_path_ = "foreach";
  }
  return loss;
}

void Lamb::BindModelWeights(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs) {
  bound_.clear();
  for (const auto& [master, copy] : pairs) {
    TORCH_CHECK(master.sizes() == copy.sizes() && master.device() == copy.device(),
                "Lamb: a model copy must have its master weight's shape and device");
    bound_[master.unsafeGetTensorImpl()] = copy;
  }
}

torch::Tensor Lamb::ModelCopyOf(const torch::Tensor& p) const {
  const auto it = bound_.find(p.unsafeGetTensorImpl());
  return it == bound_.end() ? torch::Tensor() : it->second;
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
  // Each state as its parameter: moments saved for fewer leading rows (the
  // word embeddings before the model padded them, model.vocab_padding) get
  // zero rows, which are what LAMB keeps for rows that never had a
  // gradient; any other shape is refused.
  torch::NoGradGuard no_grad;
  for (const auto& group : param_groups()) {
    for (const auto& p : group.params()) {
      const auto found = state().find(torch_compat::OptimizerStateKey(p));
      if (found == state().end()) continue;
      auto& st = static_cast<LambParamState&>(*found->second);
      for (torch::Tensor* moment : {&st.exp_avg(), &st.exp_avg_sq()}) {
        if (!moment->defined() || moment->sizes() == p.sizes()) continue;
        const bool fewer_rows = moment->dim() == p.dim() && p.dim() > 0 &&
                                moment->size(0) < p.size(0) &&
                                moment->sizes().slice(1) == p.sizes().slice(1);
        if (!fewer_rows) {
          throw StateMismatch(c10::str("the optimizer state of a ", p.sizes(),
                                       " parameter has the shape ", moment->sizes(),
                                       ": it belongs to another model config"));
        }
        torch::Tensor padded = torch::zeros_like(p, moment->options());
        padded.narrow(0, 0, moment->size(0)).copy_(*moment);
        *moment = padded;
      }
    }
  }
}

std::vector<torch::optim::OptimizerParamGroup> BertParamGroups(
    const torch::OrderedDict<std::string, torch::Tensor>& named_parameters,
    const LambOptions& options, bool exclude_from_trust_ratio) {
  std::vector<torch::Tensor> decayed, excluded;
  for (const auto& item : named_parameters) {
    const std::string& name = item.key();
    bool exclude =
        name.find("bias") != std::string::npos || name.find("LayerNorm") != std::string::npos;
    (exclude ? excluded : decayed).push_back(item.value());
  }
  LambOptions excluded_options = options;
  excluded_options.weight_decay(0.0);
  if (exclude_from_trust_ratio) excluded_options.trust_ratio(false);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, std::make_unique<LambOptions>(options));
  groups.emplace_back(excluded, std::make_unique<LambOptions>(excluded_options));
  return groups;
}

torch::Tensor GlobalGradNorm(const std::vector<torch::Tensor>& parameters, bool fused) {
  torch::NoGradGuard no_grad;
  // Each gradient's norm accumulated in double: a float reduction over the
  // millions of entries of the word embedding's gradient drops its small
  // terms (a tiny BERT's norm came out 2.6e-4 low).
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  if (fused && FusedLambBuilt() && grads.front().is_cuda()) {
    const auto type = grads.front().scalar_type();
    bool fits = type == at::kFloat || type == at::kBFloat16;
    for (const auto& g : grads) {
      fits = fits && g.scalar_type() == type && g.is_contiguous() &&
             g.device() == grads.front().device();
    }
    if (fits) return FusedSquaredNorms(grads).sum().sqrt();
  }
  return torch_compat::ForeachNorms(grads).square().sum().sqrt();
}

torch::Tensor ClipCoefficient(const torch::Tensor& norm, double max_norm) {
  if (max_norm <= 0) return {};
  torch::NoGradGuard no_grad;
  // max_norm / norm exactly as a division in double (as a host would
  // compute it), then at most 1; each gradient's multiply rounds it to the
  // gradient's dtype, as a scalar factor would be.
  return torch::div(torch::full({}, max_norm, norm.options()), norm).clamp_max(1.0);
}

torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  const torch::Tensor total = GlobalGradNorm(parameters);
  if (max_norm <= 0) return total;
  torch::NoGradGuard no_grad;
  const torch::Tensor coefficient = ClipCoefficient(total, max_norm);
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  torch_compat::ForeachMulByTensor(grads, coefficient);
  return total;
}

void SetLambScalars(const LambOptions& options, double bias_correction1,
                    double bias_correction2, kernels::LambGroup& group) {
  const auto [beta1, beta2] = options.betas();
  group.scalars.beta1 = static_cast<float>(beta1);
  group.scalars.one_minus_beta1 = static_cast<float>(1 - beta1);
  group.scalars.beta2 = static_cast<float>(beta2);
  group.scalars.one_minus_beta2 = static_cast<float>(1 - beta2);
  group.scalars.bias_correction1 = static_cast<float>(bias_correction1);
  group.scalars.bias_correction2 = static_cast<float>(bias_correction2);
  group.scalars.eps = static_cast<float>(options.eps());
  group.scalars.weight_decay = static_cast<float>(options.weight_decay());
  group.trust_ratio = options.trust_ratio();
  group.lr = static_cast<float>(options.lr());
}

}  // namespace pbert::optim
