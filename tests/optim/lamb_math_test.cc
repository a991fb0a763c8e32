// The fused LAMB kernels' CPU twins (kernels/lamb_cpu.h: the kernels'
// arguments and per-element arithmetic, kernels/lamb_math.h) against
// optim::Lamb (LibTorch's multi-tensor operations) over three steps, with
// clipping folded in; the gradient norms' twin against ATen's.
#include "kernels/lamb_cpu.h"

#include "kernels/layer_cpu.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "optim/lamb.h"

namespace pbert::kernels {
namespace {

// |a - b| in ulps of `scale` (float's spacing at it: at most scale 2^-23).
double UlpsOf(float a, float b, float scale) {
  return std::fabs(static_cast<double>(a) - b) / (static_cast<double>(scale) * 0x1p-23);
}

double Norm(const std::vector<float>& x) {
  double sum = 0;
  for (float e : x) sum += static_cast<double>(e) * e;
  return std::sqrt(sum);
}

// Each step: clip the gradients by the global norm (as ClipGradNorm), then
// LAMB (as Lamb::step); the twin takes the same gradients, one group of
// every tensor, the clipping coefficient as a double it reads in place
// (as the kernels read it from the device), and writes bf16 copies of the
// weights. A weight differs by a few ulps of the largest term its updates
// added at most: ATen fuses some multiply-adds (its vectorised add with
// alpha), the element loop does not. Mutations tried: the bias corrections
// swapped (thousands of ulps), the weight decay left out of the direction.
TEST(LambMathTest, TheTwinEqualsTheMultiTensorLambToAFewUlps) {
  torch::manual_seed(5);
  const std::vector<std::vector<int64_t>> shapes = {{64, 33}, {257}, {3, 5, 7}};
  for (const bool trust_ratio : {true, false}) {
    std::vector<torch::Tensor> params;
    for (const auto& shape : shapes) params.push_back(torch::randn(shape) * 0.05);
    optim::LambOptions options(2e-2);
    options.betas({0.86, 0.9987}).eps(1e-6).weight_decay(0.01).trust_ratio(trust_ratio);
    optim::Lamb lamb(params, options);
    // The twin's tensors, and per element the largest term an update added
    // (the weight or the step lr ratio u): a weight that an update brings
    // near 0 keeps the rounding error of those terms, which is what "a few
    // ulps" is of.
    std::vector<std::vector<float>> w, m, v, u, scale;
    std::vector<std::vector<uint16_t>> w16;
    for (const auto& p : params) {
      const auto* data = p.data_ptr<float>();
      w.emplace_back(data, data + p.numel());
      m.emplace_back(p.numel(), 0.0f);
      v.emplace_back(p.numel(), 0.0f);
      u.emplace_back(p.numel(), 0.0f);
      scale.emplace_back(p.numel(), 0.0f);
      w16.emplace_back(p.numel(), 0);
    }
    const double max_norm = 1.0;
    for (int step = 1; step <= 3; ++step) {
      std::vector<torch::Tensor> grads;
      for (auto& p : params) {
        p.mutable_grad() = torch::randn(p.sizes()) * (step == 2 ? 3.0 : 0.2);
        grads.push_back(p.grad().clone());
      }
      const double norm = optim::ClipGradNorm(params, max_norm).item<double>();
      lamb.step();
      LambGroup group;
      for (size_t t = 0; t < params.size(); ++t) {
        group.weights.push_back(w[t].data());
        group.grads.push_back(grads[t].data_ptr<float>());
        group.exp_avg.push_back(m[t].data());
        group.exp_avg_sq.push_back(v[t].data());
        group.update.push_back(u[t].data());
        group.bf16_weights.push_back(w16[t].data());
        group.sizes.push_back(static_cast<int64_t>(w[t].size()));
      }
      group.scalars.beta1 = 0.86f;
      group.scalars.one_minus_beta1 = static_cast<float>(1 - 0.86);
      group.scalars.beta2 = 0.9987f;
      group.scalars.one_minus_beta2 = static_cast<float>(1 - 0.9987);
      group.scalars.bias_correction1 = static_cast<float>(1 - std::pow(0.86, step));
      group.scalars.bias_correction2 = static_cast<float>(1 - std::pow(0.9987, step));
      group.scalars.eps = 1e-6f;
      group.scalars.weight_decay = 0.01f;
      const double clip = std::min(1.0, max_norm / norm);
      group.clip = &clip;
      group.trust_ratio = trust_ratio;
      group.lr = 2e-2f;
      std::vector<double> norms(2 * params.size());
      std::vector<std::vector<float>> before = w;
      cpu::LambStep(group, norms.data());
      for (size_t t = 0; t < params.size(); ++t) {
        const float ratio = LambTrustRatio(std::sqrt(norms[t]),
                                           std::sqrt(norms[params.size() + t]), trust_ratio);
        EXPECT_NEAR(std::sqrt(norms[t]), Norm(before[t]), 1e-12 * Norm(before[t]));
        for (size_t i = 0; i < w[t].size(); ++i) {
          scale[t][i] =
              std::max({scale[t][i], std::fabs(before[t][i]), std::fabs(2e-2f * ratio * u[t][i])});
          ASSERT_EQ(w16[t][i], cpu::ToBf16(w[t][i])) << "the bf16 copy of the new weight";
        }
      }
    }
    double worst = 0;
    for (size_t t = 0; t < params.size(); ++t) {
      const float* got = params[t].data_ptr<float>();
      for (size_t i = 0; i < w[t].size(); ++i) {
        worst = std::max(worst, UlpsOf(got[i], w[t][i], scale[t][i]));
      }
      // The bf16 copies as ATen casts the weights.
      const torch::Tensor cast = params[t].to(torch::kBFloat16);
      std::vector<uint16_t> aten(static_cast<size_t>(cast.numel()));
      std::memcpy(aten.data(), cast.data_ptr(), aten.size() * sizeof(uint16_t));
      int64_t differ = 0;
      for (size_t i = 0; i < aten.size(); ++i) {
        differ += cpu::FromBf16(aten[i]) != cpu::FromBf16(cpu::ToBf16(got[i]));
      }
      EXPECT_EQ(differ, 0) << "ToBf16 rounds as ATen's cast";
    }
    EXPECT_LE(worst, 4.0) << "trust_ratio " << trust_ratio;
  }
}

// The gradient norms' twin: each tensor's squared norm in double, from fp32
// and from bf16, against ATen's.
TEST(LambMathTest, TheSquaredNormsTwinEqualsATensSums) {
  torch::manual_seed(9);
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    std::vector<torch::Tensor> tensors = {torch::randn({1000}).to(type), torch::randn({7}).to(type),
                                          torch::zeros({0}).to(type)};
    std::vector<const void*> pointers;
    std::vector<int64_t> sizes;
    for (const auto& t : tensors) {
      pointers.push_back(t.data_ptr());
      sizes.push_back(t.numel());
    }
    std::vector<double> norms(tensors.size(), -1);
    cpu::SquaredNorms(pointers, sizes, type == torch::kBFloat16, norms.data());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const double want = tensors[t].to(torch::kDouble).pow(2).sum().item<double>();
      EXPECT_NEAR(norms[t], want, 1e-12 * std::max(want, 1.0)) << t;
    }
  }
}

TEST(LambMathTest, TheTrustRatioIsOneWhereANormIsZeroOrTheGroupTakesNone) {
  EXPECT_FLOAT_EQ(LambTrustRatio(2.0, 4.0, true), 0.5f);
  EXPECT_FLOAT_EQ(LambTrustRatio(0.0, 4.0, true), 1.0f);
  EXPECT_FLOAT_EQ(LambTrustRatio(2.0, 0.0, true), 1.0f);
  EXPECT_FLOAT_EQ(LambTrustRatio(2.0, 4.0, false), 1.0f);
}

}  // namespace
}  // namespace pbert::kernels
