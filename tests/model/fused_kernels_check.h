// The fused layers' kernel side (model/fused_layers_kernels.h) against
// their reference computed in double precision on the CPU, from the same
// inputs and the same dropout mask, in the three dtype pairs a run uses:
// fp32; bf16 products with fp32 parameters (autocast); bf16 throughout
// (master weights); on a GPU the CUDA kernels (tests/train/cuda_test.cc),
// on the CPU their twins (model::UseFusedLayerTwins), through the same
// launching code and autograd functions.
//
// Each bound follows the kernels' arithmetic: u is the unit
// roundoff of the stored dtype (2^-8 for bf16, 2^-24 for fp32), ue = u +
// H 2^-24 that of a row's fp32 sums; LayerNorm's z rounded by ue moves the
// mean and 1/sigma by ue * Z (Z = max|z| / sigma of the row), so xhat by
// 2 ue Z (1 + |xhat|); each result then adds its own rounding, and a sum over
// N rows N 2^-24 of its absolute terms. Factors of 2 cover two-sided
// roundings. A wrong mask, row or column would be off by O(1).
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/layer_math.h"
#include "model/dropout.h"
#include "model/fused_layers.h"
#include "tests/kernels/error_bounds.h"

namespace pbert::model::testing {

// Rows of N tokens: LayerNorm over H = 1024, bias and GELU over F = 4096.
inline void ExpectFusedKernelsWithinRounding(const c10::Device& device, int64_t N) {
  constexpr int64_t H = 1024, F = 4096;
  constexpr double k24 = 1.0 / (1 << 24);
  const kernels::DropoutBits bits{0x5eed5eedULL, static_cast<uint32_t>(0.1 * 4294967296.0)};
  const double scale = model::DropoutScale(bits);
  auto unit = [](at::ScalarType t) { return t == at::kBFloat16 ? 1.0 / 256 : k24; };
  auto cpu = [](const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble); };
  auto leaf = [](const at::Tensor& t, at::ScalarType type, const c10::Device& device) {
    return t.to(device, type).detach().requires_grad_();
  };
  // Every element of `got` within its bound of `want`.
  auto within = [&](const at::Tensor& got, const at::Tensor& want, const at::Tensor& bound,
                    const std::string& what) {
    const at::Tensor excess = (cpu(got) - want).abs() - bound;
    EXPECT_LE(excess.max().item<double>(), 0.0)
        << what << ": worst error " << (cpu(got) - want).abs().max().item<double>();
  };
  const std::pair<at::ScalarType, at::ScalarType> pairs[] = {
      {at::kFloat, at::kFloat}, {at::kBFloat16, at::kFloat}, {at::kBFloat16, at::kBFloat16}};
  for (const auto& [act, param] : pairs) {
    const std::string name = std::string(c10::toString(act)) + "/" + c10::toString(param);
    const double ua = unit(act), up = unit(param), ue = up + H * k24;
    torch::manual_seed(31);
    // Inputs rounded to their dtypes once, so both sides see the same values.
    const at::Tensor y0 = torch::randn({N, H}).to(act).to(at::kDouble);
    const at::Tensor b0 = (0.1 * torch::randn({H})).to(param).to(at::kDouble);
    const at::Tensor r0 = torch::randn({N, H}).to(param).to(at::kDouble);
    const at::Tensor g0 = (1 + 0.1 * torch::randn({H})).to(param).to(at::kDouble);
    const at::Tensor c0 = (0.1 * torch::randn({H})).to(param).to(at::kDouble);
    const at::Tensor d0 = torch::randn({N, H}).to(param).to(at::kDouble);  // d out
    std::vector<at::Tensor> k = {leaf(y0, act, device), leaf(b0, param, device), leaf(r0, param, device),
                                 leaf(g0, param, device), leaf(c0, param, device)};
    std::vector<at::Tensor> ref = {leaf(y0, at::kDouble, c10::kCPU), leaf(b0, at::kDouble, c10::kCPU),
                                   leaf(r0, at::kDouble, c10::kCPU), leaf(g0, at::kDouble, c10::kCPU),
                                   leaf(c0, at::kDouble, c10::kCPU)};
    const at::Tensor out_k = model::BiasDropoutAddNorm(k[0], k[1], k[2], k[3], k[4], bits, 1e-12);
    const at::Tensor out_r =
        model::BiasDropoutAddNorm(ref[0], ref[1], ref[2], ref[3], ref[4], bits, 1e-12);
    ASSERT_EQ(out_k.scalar_type(), param) << name;
    const auto grads_k = torch::autograd::grad({out_k}, k, {d0.to(device, param)});
    const auto grads_r = torch::autograd::grad({out_r}, ref, {d0});
    // The row statistics, in double.
    const at::Tensor mask = model::DropoutMask(N * H, bits).view({N, H}).to(at::kDouble);
    const at::Tensor z = (y0 + b0) * mask * scale + r0;
    const at::Tensor mean = z.mean(1, true);
    const at::Tensor rstd = 1 / (z.var(1, /*unbiased=*/false, true) + 1e-12).sqrt();
    const at::Tensor xhat = (z - mean) * rstd;
    const at::Tensor Z = z.abs().amax(1, true) * rstd;
    const at::Tensor spread = 2 * ue * Z * (1 + xhat.abs());  // bound of xhat's error
    within(out_k, out_r.detach(), 2 * g0.abs() * spread + up * out_r.detach().abs(),
           name + " LayerNorm output");
    const at::Tensor gg = d0 * g0;
    const at::Tensor A = (gg.abs() * (1 + xhat.abs())).mean(1, true);
    const at::Tensor dz_bound = 2 * rstd * spread * (gg.abs() + 2 * A);
    const at::Tensor dz = grads_r[2].detach(), dy = grads_r[0].detach();
    within(grads_k[2], dz, dz_bound + up * dz.abs(), name + " d residual");
    within(grads_k[0], dy, mask * scale * dz_bound + ua * dy.abs(), name + " d y");
    EXPECT_TRUE(cpu(grads_k[0]).masked_select(mask == 0).eq(0).all().item<bool>())
        << name << ": the kernel's mask is not the CPU's";
    within(grads_k[1], grads_r[1].detach(),
           (mask * scale * dz_bound).sum(0) + N * k24 * dy.abs().sum(0) +
               up * grads_r[1].detach().abs(),
           name + " d bias");
    within(grads_k[3], grads_r[3].detach(),
           2 * (d0.abs() * spread).sum(0) + N * k24 * (d0 * xhat).abs().sum(0) +
               up * grads_r[3].detach().abs(),
           name + " d gamma");
    within(grads_k[4], grads_r[4].detach(),
           N * k24 * d0.abs().sum(0) + up * grads_r[4].detach().abs(), name + " d beta");

    // bias + GELU over [N, F]: x = y + b in fp32, each element within the
    // bound of its fp32 arithmetic (tests/kernels/error_bounds.h, which
    // tests/kernels/layer_math_test.cc checks on the CPU), then rounded to
    // `act`.
    const at::Tensor fy = torch::randn({N, F}).to(act).to(at::kDouble);
    const at::Tensor fb = (0.5 * torch::randn({F})).to(param).to(at::kDouble);
    const at::Tensor fg = torch::randn({N, F}).to(act).to(at::kDouble);
    std::vector<at::Tensor> gk = {leaf(fy, act, device), leaf(fb, param, device)};
    std::vector<at::Tensor> gr = {leaf(fy, at::kDouble, c10::kCPU), leaf(fb, at::kDouble, c10::kCPU)};
    const at::Tensor gelu_k = model::BiasGelu(gk[0], gk[1]);
    const at::Tensor gelu_r = model::BiasGelu(gr[0], gr[1]).detach();
    ASSERT_EQ(gelu_k.scalar_type(), act) << name;
    const auto ggk = torch::autograd::grad({gelu_k}, gk, {fg.to(device, act)});
    const auto ggr = torch::autograd::grad({model::BiasGelu(gr[0], gr[1])}, gr, {fg});
    const at::Tensor x = (fy + fb).contiguous();
    at::Tensor out_bound = torch::empty_like(x), grad_bound = torch::empty_like(x);
    {
      const double* xs = x.data_ptr<double>();
      double* ob = out_bound.data_ptr<double>();
      double* gb = grad_bound.data_ptr<double>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const kernels::testing::GeluBound b = kernels::testing::GeluErrorBound(xs[i]);
        ob[i] = b.out;
        gb[i] = b.grad;
      }
    }
    within(gelu_k, gelu_r, out_bound + ua * gelu_r.abs(), name + " GELU output");
    const at::Tensor dfy = ggr[0].detach();
    // The gradient times gelu' in fp32 (one more rounding), then to `act`.
    const at::Tensor dfy_bound = fg.abs() * grad_bound + k24 * dfy.abs();
    within(ggk[0], dfy, dfy_bound + ua * dfy.abs(), name + " GELU d y");
    within(ggk[1], ggr[1].detach(),
           dfy_bound.sum(0) + N * k24 * dfy.abs().sum(0) + up * ggr[1].detach().abs(),
           name + " GELU d bias");
  }}

}  // namespace pbert::model::testing
