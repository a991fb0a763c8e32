#include "optim/lamb.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "common/torch_compat.h"
#include "gtest/gtest.h"
#include "optim/packing_adjustment.h"
#include "tests/optim/lamb_golden.h"

namespace pbert::optim {
namespace {

constexpr int kSizes[3] = {12, 4, 2};

// The same inputs as tests/optim/lamb_golden.py.
std::vector<torch::Tensor> InitialParams() {
  auto options = torch::TensorOptions().dtype(torch::kDouble);
  std::vector<torch::Tensor> params = {
      (0.5 * torch::sin(torch::arange(12, options) + 1.0)).reshape({3, 4}),
      0.1 * (torch::arange(4, options) - 1.5), torch::zeros({2}, options)};
  for (auto& p : params) p.set_requires_grad(true);
  return params;
}

void SetGradients(std::vector<torch::Tensor>& params, int t) {
  for (int p = 0; p < 3; ++p) {
    auto i = torch::arange(kSizes[p], torch::kDouble);
    auto g = torch::cos(0.7 * i + 0.3 * t + p) * 0.1 * (1 + torch::fmod(i, 3));
    params[p].mutable_grad() = g.reshape(params[p].sizes());
  }
}

LambOptions GoldenOptions(bool bias_correction) {
  return LambOptions(0.01)
      .betas({0.9, 0.999})
      .eps(1e-6)
      .weight_decay(0.01)
      .bias_correction(bias_correction);
}

Lamb MakeLamb(std::vector<torch::Tensor>& params, bool bias_correction, bool exclude) {
  LambOptions decayed = GoldenOptions(bias_correction);
  LambOptions excluded = decayed;
  if (exclude) excluded.weight_decay(0).trust_ratio(false);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{params[0]},
                      std::make_unique<LambOptions>(decayed));
  groups.emplace_back(std::vector<torch::Tensor>{params[1], params[2]},
                      std::make_unique<LambOptions>(excluded));
  return Lamb(std::move(groups), decayed);
}

torch::Tensor Flat(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : params) flat.push_back(p.detach().reshape(-1));
  return torch::cat(flat);
}

class LambGoldenTest : public ::testing::TestWithParam<int> {};

TEST_P(LambGoldenTest, MatchesTheIndependentComputation) {
  const int c = GetParam();
  const bool bias_correction = c != 1;
  const bool exclude = c != 2;
  auto params = InitialParams();
  Lamb lamb = MakeLamb(params, bias_correction, exclude);
  for (int t = 1; t <= kGoldenSteps; ++t) {
    SetGradients(params, t);
    lamb.step();
    torch::Tensor got = Flat(params);
    for (int k = 0; k < kGoldenValues; ++k) {
      EXPECT_NEAR(got[k].item<double>(), kLambGolden[c][t - 1][k], 1e-13)
          << "step " << t << " value " << k;
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"BiasCorrectionExcluded", "NoBiasCorrectionExcluded",
                                       "BiasCorrectionAllDecayed"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Cases, LambGoldenTest, ::testing::Values(0, 1, 2), CaseName);

TEST(LambTest, ZeroWeightsTakeAPlainAdamStep) {
  // ||w|| = 0: the trust ratio guard gives 1, so the first step moves each
  // weight by lr * m'/(sqrt(v')+eps) = lr * sign(g) (bias-corrected).
  auto w = torch::zeros({3}, torch::kDouble).set_requires_grad(true);
  Lamb lamb({w}, LambOptions(0.1).weight_decay(0.0).eps(0.0));
  w.mutable_grad() = torch::tensor({2.0, -3.0, 0.5}, torch::kDouble);
  lamb.step();
  EXPECT_TRUE(torch::allclose(w, torch::tensor({-0.1, 0.1, -0.1}, torch::kDouble)));
}

TEST(LambTest, RejectsBadOptions) {
  auto w = torch::zeros({1}).set_requires_grad(true);
  EXPECT_THROW(Lamb({w}, LambOptions(-1.0)), c10::Error);
  EXPECT_THROW(Lamb({w}, LambOptions(0.1).betas({1.0, 0.9})), c10::Error);
  EXPECT_THROW(Lamb({w}, LambOptions(0.1).weight_decay(-0.1)), c10::Error);
}

TEST(LambTest, PackingBetaIdentity) {
  // The paper's 3.3: one update with (b1^2, b2^2) leaves the moments that
  // two updates with the same gradient and (b1, b2) leave.
  const double b1 = 0.9, b2 = 0.999;
  auto make = [](double beta1, double beta2) {
    auto w = torch::linspace(-1, 1, 7, torch::kDouble).set_requires_grad(true);
    return std::make_pair(w, std::make_unique<Lamb>(std::vector<torch::Tensor>{w},
                                                    LambOptions(0.0).betas({beta1, beta2})));
  };
  auto grad0 = torch::linspace(0.3, -0.2, 7, torch::kDouble);
  auto grad = torch::linspace(-0.5, 0.8, 7, torch::kDouble);
  auto [w_once, once] = make(b1 * b1, b2 * b2);
  auto [w_twice, twice] = make(b1, b2);
  // Non-zero moments to start from: an update with grad0 and the squared
  // betas equals two with the plain betas, so both start equal.
  w_once.mutable_grad() = grad0.clone();
  once->step();
  w_twice.mutable_grad() = grad0.clone();
  twice->step();
  twice->step();
  w_once.mutable_grad() = grad.clone();
  once->step();
  w_twice.mutable_grad() = grad.clone();
  twice->step();
  twice->step();
  auto& s_once = static_cast<LambParamState&>(
      *once->state().at(torch_compat::OptimizerStateKey(w_once)));
  auto& s_twice = static_cast<LambParamState&>(
      *twice->state().at(torch_compat::OptimizerStateKey(w_twice)));
  EXPECT_TRUE(torch::allclose(s_once.exp_avg(), s_twice.exp_avg(), 0, 1e-15));
  EXPECT_TRUE(torch::allclose(s_once.exp_avg_sq(), s_twice.exp_avg_sq(), 0, 1e-15));
  // And AdjustForPacking gives those betas for p = 2.
  auto adjusted = AdjustForPacking(PackingAdjustment::kBetas, 2.0, {b1, b2, 8});
  ASSERT_TRUE(adjusted.ok());
  EXPECT_DOUBLE_EQ(adjusted->beta1, b1 * b1);
  EXPECT_DOUBLE_EQ(adjusted->beta2, b2 * b2);
  EXPECT_EQ(adjusted->accumulation_steps, 8);
}

TEST(LambTest, SaveAndLoadContinueBitIdentically) {
  auto params = InitialParams();
  Lamb lamb = MakeLamb(params, true, true);
  for (int t = 1; t <= 3; ++t) {
    SetGradients(params, t);
    lamb.step();
  }
  std::string path = std::filesystem::temp_directory_path() / "pbert_lamb_state.pt";
  torch::serialize::OutputArchive archive;
  lamb.save(archive);
  archive.save_to(path);

  std::vector<torch::Tensor> resumed_params;
  for (const auto& p : params) resumed_params.push_back(p.detach().clone().set_requires_grad(true));
  // LibTorch restores the state, not the options: those come from the run's
  // config, as when the trainer resumes.
  Lamb resumed = MakeLamb(resumed_params, true, true);
  torch::serialize::InputArchive in;
  in.load_from(path);
  resumed.load(in);
  for (int t = 4; t <= 8; ++t) {
    SetGradients(params, t);
    lamb.step();
    SetGradients(resumed_params, t);
    resumed.step();
  }
  for (size_t p = 0; p < params.size(); ++p) {
    EXPECT_TRUE(torch::equal(params[p], resumed_params[p])) << "parameter " << p;
  }
  std::filesystem::remove(path);
}

TEST(ClipGradNormTest, ScalesToTheLimitAndReportsTheNorm) {
  auto a = torch::zeros({2}).set_requires_grad(true);
  auto b = torch::zeros({1}).set_requires_grad(true);
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  EXPECT_DOUBLE_EQ(ClipGradNorm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6f, 1e-7);
  EXPECT_NEAR(b.grad()[0].item<float>(), 0.8f, 1e-7);
  EXPECT_NEAR(ClipGradNorm({a, b}, 10.0), 1.0, 1e-6);  // under the limit: unchanged
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6f, 1e-7);
}

TEST(BertParamGroupsTest, BiasAndLayerNormAreExcluded) {
  torch::OrderedDict<std::string, torch::Tensor> named;
  named.insert("encoder.layer.0.attention.self.query.weight", torch::zeros({2, 2}));
  named.insert("encoder.layer.0.attention.self.query.bias", torch::zeros({2}));
  named.insert("encoder.layer.0.output.LayerNorm.weight", torch::zeros({2}));
  auto groups = BertParamGroups(named, LambOptions(0.1).weight_decay(0.01), true);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params().size(), 1u);
  EXPECT_EQ(groups[1].params().size(), 2u);
  const auto& excluded = static_cast<const LambOptions&>(groups[1].options());
  EXPECT_EQ(excluded.weight_decay(), 0.0);
  EXPECT_FALSE(excluded.trust_ratio());
  EXPECT_EQ(static_cast<const LambOptions&>(groups[0].options()).weight_decay(), 0.01);
}

TEST(AccumulationTest, NormalisingByTheStepTotalEqualsOneBigBatch) {
  // Three micro-batches with 2, 5 and 1 counted items (tokens or sequences):
  // each micro-batch's summed loss divided by the whole step's count (8)
  // gives the gradient of the mean over all 8, which normalising each
  // micro-batch by its own count does not.
  torch::manual_seed(0);
  auto w = torch::randn({4}, torch::kDouble).set_requires_grad(true);
  std::vector<torch::Tensor> batches = {torch::randn({2, 4}, torch::kDouble),
                                        torch::randn({5, 4}, torch::kDouble),
                                        torch::randn({1, 4}, torch::kDouble)};
  auto loss_sum = [&](const torch::Tensor& x) { return (x.matmul(w) - 1).pow(2).sum(); };
  loss_sum(torch::cat(batches)).div(8).backward();
  auto reference = w.grad().clone();
  w.mutable_grad().zero_();
  for (const auto& x : batches) loss_sum(x).div(8).backward();
  EXPECT_TRUE(torch::allclose(w.grad(), reference, 1e-12, 1e-12));
  w.mutable_grad().zero_();
  for (const auto& x : batches) loss_sum(x).div(x.size(0) * 3.0).backward();
  EXPECT_FALSE(torch::allclose(w.grad(), reference, 1e-6, 1e-6));
}

// The CPU's fused two-pass update (contiguous float and double tensors)
// against the general tensor-operation path (taken here by a non-contiguous
// parameter): the same update to float rounding, over several steps.
TEST(LambTest, FusedAndGeneralPathsAgree) {
  torch::manual_seed(11);
  at::Tensor values = torch::randn({7, 5});
  const at::Tensor initial = values.t().clone();
  at::Tensor fused = values.t().contiguous().requires_grad_();
  at::Tensor general = values.t().detach().requires_grad_();  // strided view
  ASSERT_TRUE(fused.is_contiguous());
  ASSERT_FALSE(general.is_contiguous());
  Lamb a({fused}, GoldenOptions(true)), b({general}, GoldenOptions(true));
  for (int t = 1; t <= 5; ++t) {
    at::Tensor g = torch::randn({5, 7});
    fused.mutable_grad() = g.clone();
    general.mutable_grad() = g.clone();
    a.step();
    b.step();
    EXPECT_TRUE(torch::allclose(fused, general, 1e-5, 1e-6)) << "step " << t;
  }
  EXPECT_FALSE(torch::allclose(fused, initial, 1e-3, 1e-3)) << "the parameters moved";
}

}  // namespace
}  // namespace pbert::optim
