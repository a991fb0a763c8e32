// The fused LAMB's per-element arithmetic (kernels/lamb_math.h), run on the
// CPU element by element, against optim::Lamb (LibTorch's multi-tensor
// operations) over three steps, with clipping folded in.
#include "kernels/lamb_math.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
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
// LAMB (as Lamb::step); the reference takes the same gradients and applies
// LambDirection, LambTrustRatio and LambApply to each element, with the
// clipping coefficient folded in. A weight differs by a few ulps of the
// largest term its updates added at most: ATen fuses some multiply-adds
// (its vectorised add with alpha), the element loop does not. Mutations tried: the bias corrections swapped
// (thousands of ulps), the weight decay left out of the direction.
TEST(LambMathTest, ElementsEqualTheMultiTensorLambToAFewUlps) {
  torch::manual_seed(5);
  const std::vector<std::vector<int64_t>> shapes = {{64, 33}, {257}, {3, 5, 7}};
  for (const bool trust_ratio : {true, false}) {
    std::vector<torch::Tensor> params;
    for (const auto& shape : shapes) params.push_back(torch::randn(shape) * 0.05);
    optim::LambOptions options(2e-2);
    options.betas({0.86, 0.9987}).eps(1e-6).weight_decay(0.01).trust_ratio(trust_ratio);
    optim::Lamb lamb(params, options);
    // Per element, the largest term an update added (the weight or the
    // step lr ratio u): a weight that an update brings near 0 keeps the
    // rounding error of those terms, which is what "a few ulps" is of.
    std::vector<std::vector<float>> w, m, v, scale;
    for (const auto& p : params) {
      const auto* data = p.data_ptr<float>();
      w.emplace_back(data, data + p.numel());
      m.emplace_back(p.numel(), 0.0f);
      v.emplace_back(p.numel(), 0.0f);
      scale.emplace_back(p.numel(), 0.0f);
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
      LambScalars s;
      s.beta1 = 0.86f;
      s.one_minus_beta1 = static_cast<float>(1 - 0.86);
      s.beta2 = 0.9987f;
      s.one_minus_beta2 = static_cast<float>(1 - 0.9987);
      s.bias_correction1 = static_cast<float>(1 - std::pow(0.86, step));
      s.bias_correction2 = static_cast<float>(1 - std::pow(0.9987, step));
      s.eps = 1e-6f;
      s.weight_decay = 0.01f;
      s.clip = static_cast<float>(std::min(1.0, max_norm / norm));
      for (size_t t = 0; t < params.size(); ++t) {
        const float* g = grads[t].data_ptr<float>();
        std::vector<float> u(w[t].size());
        for (size_t i = 0; i < u.size(); ++i) u[i] = LambDirection(g[i], w[t][i], m[t][i], v[t][i], s);
        const float ratio = LambTrustRatio(Norm(w[t]), Norm(u), trust_ratio);
        for (size_t i = 0; i < u.size(); ++i) {
          scale[t][i] = std::max({scale[t][i], std::fabs(w[t][i]), std::fabs(2e-2f * ratio * u[i])});
          w[t][i] = LambApply(w[t][i], u[i], ratio, 2e-2f);
        }
      }
    }
    double worst = 0;
    for (size_t t = 0; t < params.size(); ++t) {
      const float* got = params[t].data_ptr<float>();
      for (size_t i = 0; i < w[t].size(); ++i) {
        worst = std::max(worst, UlpsOf(got[i], w[t][i], scale[t][i]));
      }
    }
    EXPECT_LE(worst, 4.0) << "trust_ratio " << trust_ratio;
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
