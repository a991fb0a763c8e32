#include "optim/lamb.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/serialize.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/torch_compat.h"

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
    : Optimizer(std::move(param_groups), std::make_unique<LambOptions>(defaults)) {
  TORCH_CHECK(defaults.lr() >= 0, "Invalid learning rate: ", defaults.lr());
  TORCH_CHECK(defaults.eps() >= 0, "Invalid epsilon value: ", defaults.eps());
  auto [beta1, beta2] = defaults.betas();
  TORCH_CHECK(0 <= beta1 && beta1 < 1.0, "Invalid beta parameter at index 0: ", beta1);
  TORCH_CHECK(0 <= beta2 && beta2 < 1.0, "Invalid beta parameter at index 1: ", beta2);
  TORCH_CHECK(defaults.weight_decay() >= 0,
              "Invalid weight_decay value: ", defaults.weight_decay());
}

namespace {

// One parameter's LAMB update on the CPU in two passes over memory, instead
// of the ~20 tensor operations (each a pass) of the general path: the first
// updates the moments and sums |w|^2 and |update|^2, the second applies the
// update, recomputed from the moments. Partial sums are taken over fixed
// blocks and added in order, so the result does not depend on the thread
// count. Returns false (nothing done) for tensors it does not handle.
bool FusedStep(torch::Tensor& p, const torch::Tensor& grad, torch::Tensor& m, torch::Tensor& v,
               const LambOptions& options, double c1, double c2) {
  if (!p.device().is_cpu() || !p.is_contiguous() || !grad.is_contiguous() ||
      !m.is_contiguous() || !v.is_contiguous() || grad.scalar_type() != p.scalar_type() ||
      (p.scalar_type() != at::kFloat && p.scalar_type() != at::kDouble)) {
    return false;
  }
  const auto [beta1, beta2] = options.betas();
  const double eps = options.eps(), wd = options.weight_decay();
  const int64_t n = p.numel(), block = 16384, blocks = (n + block - 1) / block;
  bool ok = false;
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "pbert_lamb", [&] {
    using T = scalar_t;
    T* w = p.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* mm = m.data_ptr<T>();
    T* vv = v.data_ptr<T>();
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    const T a1 = static_cast<T>(1 - beta1), a2 = static_cast<T>(1 - beta2);
    const T tc1 = static_cast<T>(c1), tc2 = static_cast<T>(c2), teps = static_cast<T>(eps),
            twd = static_cast<T>(wd);
    // As the general path computes it: (m / c1) / (sqrt(v / c2) + eps) + wd * w.
    auto update = [&](int64_t i) {
      T u = (mm[i] / tc1) / (std::sqrt(vv[i] / tc2) + teps);
      return wd != 0 ? u + twd * w[i] : u;
    };
    std::vector<double> w_sq(blocks), u_sq(blocks);
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t b = first; b < last; ++b) {
        double ws = 0, us = 0;
        for (int64_t i = b * block, end = std::min(n, i + block); i < end; ++i) {
          mm[i] = mm[i] * b1 + a1 * g[i];
          vv[i] = vv[i] * b2 + a2 * (g[i] * g[i]);
          const T u = update(i);
          ws += static_cast<double>(w[i]) * w[i];
          us += static_cast<double>(u) * u;
        }
        w_sq[b] = ws;
        u_sq[b] = us;
      }
    });
    double ws = 0, us = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      ws += w_sq[b];
      us += u_sq[b];
    }
    const double w_norm = std::sqrt(ws), u_norm = std::sqrt(us);
    const T ratio = static_cast<T>(options.trust_ratio() && w_norm > 0 && u_norm > 0
                                       ? w_norm / u_norm
                                       : 1.0);
    const T step = static_cast<T>(-options.lr());
    at::parallel_for(0, n, block, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) w[i] = w[i] + step * (update(i) * ratio);
    });
    ok = true;
  });
  return ok;
}

}  // namespace

torch::Tensor Lamb::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = {};
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const LambOptions&>(group.options());
    auto [beta1, beta2] = options.betas();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = p.grad();
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
      torch::Tensor& m = state.exp_avg();
      torch::Tensor& v = state.exp_avg_sq();
      double c1 = 1, c2 = 1;
      if (options.bias_correction()) {
        c1 = 1 - std::pow(beta1, static_cast<double>(state.step()));
        c2 = 1 - std::pow(beta2, static_cast<double>(state.step()));
      }
      if (FusedStep(p, grad, m, v, options, c1, c2)) continue;
      m.mul_(beta1).add_(grad, 1 - beta1);
      v.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      torch::Tensor update = (m / c1) / ((v / c2).sqrt_().add_(options.eps()));
      if (options.weight_decay() != 0) update.add_(p, options.weight_decay());

      if (options.trust_ratio()) {
        // The ratio stays a tensor: no host sync per parameter (on a GPU
        // that would stall the stream once per tensor).
        torch::Tensor w_norm = p.norm(), u_norm = update.norm();
        torch::Tensor ratio = torch::where(w_norm.gt(0).logical_and(u_norm.gt(0)),
                                           w_norm / u_norm, torch::ones_like(w_norm));
        update.mul_(ratio);
      }
      p.add_(update, -options.lr());
    }
  }
  return loss;
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
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

double ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& p : parameters) {
    if (p.grad().defined()) norms.push_back(p.grad().norm(2).to(torch::kDouble));
  }
  if (norms.empty()) return 0.0;
  double total = torch::stack(norms).norm(2).item<double>();
  if (max_norm > 0 && total > max_norm) {
    for (const auto& p : parameters) {
      if (p.grad().defined()) p.grad().mul_(max_norm / total);
    }
  }
  return total;
}

}  // namespace pbert::optim
