#include "optim/lamb.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>

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

// BERT's groups (optim::BertParamGroups): the biases and LayerNorms step
// without weight decay and trust ratio, the rest with them, and a group
// that names its own options keeps them. LibTorch after 2.11 gives every
// group of an optimizer not its own the defaults' options, unless Lamb
// puts the group's back (found with Debian's 2.14, where the biases and
// LayerNorms were decayed).
TEST(LambTest, EachGroupStepsWithTheOptionsItCameWith) {
  torch::OrderedDict<std::string, torch::Tensor> named;
  named.insert("layer.dense.weight", torch::ones({2, 2}).set_requires_grad(true));
  named.insert("layer.dense.bias", torch::ones({2}).set_requires_grad(true));
  named.insert("layer.LayerNorm.weight", torch::ones({2}).set_requires_grad(true));
  const LambOptions defaults = LambOptions(1e-3).weight_decay(0.01).eps(1e-6);
  std::vector<torch::optim::OptimizerParamGroup> groups = BertParamGroups(named, defaults, true);
  const LambOptions own = LambOptions(5e-4).betas({0.8, 0.99}).weight_decay(0.1);
  groups.emplace_back(std::vector<torch::Tensor>{torch::ones({3}).set_requires_grad(true)},
                      std::make_unique<LambOptions>(own));
  Lamb lamb(std::move(groups), defaults);
  ASSERT_EQ(lamb.param_groups().size(), 3u);
  auto options = [&](size_t i) {
    return static_cast<const LambOptions&>(lamb.param_groups()[i].options());
  };
  EXPECT_EQ(options(0), defaults);
  EXPECT_EQ(options(1).weight_decay(), 0.0);
  EXPECT_FALSE(options(1).trust_ratio());
  EXPECT_EQ(options(1).lr(), 1e-3);
  EXPECT_EQ(options(1).eps(), 1e-6);
  EXPECT_EQ(options(2), own);
  EXPECT_EQ(lamb.param_groups()[1].params().size(), 2u);
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

// A state saved for a parameter with fewer rows (word embeddings saved
// before the model padded them, model.vocab_padding) loads with zero rows
// for the padding, and the step then moves the unpadded rows as the
// unpadded optimizer does and leaves the zero rows at zero; a state of
// another shape is refused.
TEST(LambTest, AStateOfFewerRowsLoadsWithZeroRowsAndOthersAreRefused) {
  torch::manual_seed(3);
  auto small = torch::randn({5, 4}).set_requires_grad(true);
  std::vector<torch::optim::OptimizerParamGroup> g1;
  g1.emplace_back(std::vector<torch::Tensor>{small},
                  std::make_unique<LambOptions>(LambOptions(0.1).weight_decay(0.01)));
  Lamb saved(std::move(g1), LambOptions(0.1).weight_decay(0.01));
  small.mutable_grad() = torch::randn({5, 4});
  saved.step();
  const std::string path = std::filesystem::temp_directory_path() / "pbert_lamb_rows.pt";
  torch::serialize::OutputArchive archive;
  saved.save(archive);
  archive.save_to(path);
  auto load_into = [&](const torch::Tensor& param) {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{param},
                        std::make_unique<LambOptions>(LambOptions(0.1).weight_decay(0.01)));
    auto lamb = std::make_unique<Lamb>(std::move(groups), LambOptions(0.1).weight_decay(0.01));
    torch::serialize::InputArchive in;
    in.load_from(path);
    lamb->load(in);
    return lamb;
  };
  auto padded = torch::zeros({8, 4});
  padded.narrow(0, 0, 5).copy_(small.detach());
  padded.set_requires_grad(true);
  auto lamb = load_into(padded);
  const auto& state = static_cast<const LambParamState&>(
      *lamb->state().at(torch_compat::OptimizerStateKey(padded)));
  ASSERT_EQ(state.exp_avg().sizes(), padded.sizes());
  EXPECT_TRUE(torch::equal(state.exp_avg().narrow(0, 5, 3), torch::zeros({3, 4})));
  EXPECT_TRUE(torch::equal(state.exp_avg_sq().narrow(0, 0, 5),
                           static_cast<const LambParamState&>(
                               *saved.state().at(torch_compat::OptimizerStateKey(small)))
                               .exp_avg_sq()));
  // One more step of each, the padding rows without a gradient.
  const auto grad = torch::randn({5, 4});
  small.mutable_grad() = grad.clone();
  saved.step();
  padded.mutable_grad() = torch::zeros({8, 4});
  padded.mutable_grad().narrow(0, 0, 5).copy_(grad);
  lamb->step();
  // The trust ratio's norms sum the same squares plus zeros: equal to a
  // few fp32 roundings.
  EXPECT_TRUE(torch::allclose(padded.detach().narrow(0, 0, 5), small.detach(), 1e-6, 1e-7));
  EXPECT_TRUE(torch::equal(padded.detach().narrow(0, 5, 3), torch::zeros({3, 4})));
  // Another shape: refused, naming both.
  auto other = torch::zeros({5, 3}).set_requires_grad(true);
  try {
    load_into(other);
    ADD_FAILURE() << "a [5, 3] parameter took a [5, 4] state";
  } catch (const StateMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("[5, 4]"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(ClipGradNormTest, ScalesToTheLimitAndReportsTheNorm) {
  auto a = torch::zeros({2}).set_requires_grad(true);
  auto b = torch::zeros({1}).set_requires_grad(true);
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  EXPECT_DOUBLE_EQ(ClipGradNorm({a, b}, 1.0).item<double>(), 5.0);
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6f, 1e-7);
  EXPECT_NEAR(b.grad()[0].item<float>(), 0.8f, 1e-7);
  EXPECT_NEAR(ClipGradNorm({a, b}, 10.0).item<double>(), 1.0, 1e-6);  // under the limit: unchanged
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6f, 1e-7);
}

// The norm of float gradients against a long double sum of their squares.
// Each square of a float is exact in double; a sum of n positive terms in
// double is within n * eps_double of the exact sum, relatively (Higham,
// Accuracy and Stability of Numerical Algorithms, 4.2), whatever order the
// kernel adds them in, and the root halves that.
long double ReferenceSquares(const torch::Tensor& g) {
  torch::Tensor d = g.to(torch::kDouble).contiguous();
  const double* x = d.data_ptr<double>();
  long double sum = 0;
  for (int64_t i = 0; i < d.numel(); ++i) sum += static_cast<long double>(x[i]) * x[i];
  return sum;
}

TEST(ClipGradNormTest, EqualsADoublePrecisionSumOverMixedMagnitudes) {
  // A word-embedding-sized gradient (3.9M entries): most rows small (words
  // not in the batch: 1e-9 to 1e-6), a few thousand large ones; and two
  // small tensors beside it. A float reduction loses the small terms'
  // contribution, which is about 1e-4 of the total here.
  torch::manual_seed(5);
  auto big = torch::zeros({30522, 128}).set_requires_grad(true);
  torch::Tensor g = torch::randn({30522, 128}) * torch::pow(10.0, torch::rand({30522, 1}) * 3 - 9);
  g.narrow(0, 0, 3000).mul_(1e5);
  big.mutable_grad() = g;
  auto bias = torch::zeros({128}).set_requires_grad(true);
  bias.mutable_grad() = torch::randn({128}) * 1e-3;
  auto none = torch::zeros({4}).set_requires_grad(true);  // no gradient: left out
  const long double squares = ReferenceSquares(big.grad()) + ReferenceSquares(bias.grad());
  const double reference = static_cast<double>(std::sqrt(squares));
  const double norm = GlobalGradNorm({big, bias, none}).item<double>();
  const double terms = static_cast<double>(big.numel() + bias.numel());
  EXPECT_NEAR(norm, reference, terms * std::numeric_limits<double>::epsilon() * reference);
  // Clipping to half of it scales every gradient by exactly that ratio.
  const torch::Tensor before = big.grad().clone();
  EXPECT_DOUBLE_EQ(ClipGradNorm({big, bias, none}, 0.5 * norm).item<double>(), norm);
  EXPECT_TRUE(torch::allclose(big.grad(), before * (0.5 * norm / norm), 0, 0));
  // Float rounding of the scaled values.
  EXPECT_NEAR(GlobalGradNorm({big, bias}).item<double>(), 0.5 * norm, 1e-6 * norm);
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

// The multi-tensor step against LAMB written out one parameter at a time
// with plain tensor operations (as the header states it), in float, over
// several steps of two groups as BERT trains them (decay and trust ratio;
// neither), on tensors large and of one element. The two compute the same
// formula in another order of float operations: each element's update u
// differs by at most a few float roundings (some ten operations: kOps * eps
// relative), and each new weight may round differently once (eps |w|).
// Summed over the steps, that bounds the weights' difference; the moments
// and norms add terms of the same order.
// Two groups as BERT's over four parameters: 0 and 2 decayed and
// trust-ratio scaled with `with`, 1 and 3 neither.
Lamb TwoGroups(const std::vector<torch::Tensor>& params,
               const LambOptions& with = LambOptions(0.02).weight_decay(0.01)) {
  LambOptions without = with;
  without.weight_decay(0).trust_ratio(false);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{params[0], params[2]},
                      std::make_unique<LambOptions>(with));
  groups.emplace_back(std::vector<torch::Tensor>{params[1], params[3]},
                      std::make_unique<LambOptions>(without));
  return Lamb(std::move(groups), with);
}

TEST(LambTest, TheMultiTensorStepEqualsThePerParameterOne) {
  constexpr double kEpsF = std::numeric_limits<float>::epsilon();
  constexpr double kOps = 32;
  constexpr int kSteps = 5;
  const double lr = 0.01, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-6;
  torch::manual_seed(11);
  const std::vector<torch::Tensor> initial = {torch::randn({300, 100}), torch::randn({100}),
                                              torch::randn({1}), torch::zeros({7})};
  const std::vector<bool> decayed = {true, false, true, false};
  std::vector<torch::Tensor> params, m, v, reference;
  for (const auto& x : initial) {
    params.push_back(x.clone().requires_grad_());
    reference.push_back(x.clone());
    m.push_back(torch::zeros_like(x));
    v.push_back(torch::zeros_like(x));
  }
  Lamb lamb = TwoGroups(params, LambOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd));
  std::vector<double> bound(initial.size(), 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < initial.size(); ++i) {
      const torch::Tensor g = torch::randn(initial[i].sizes()) * (i == 0 ? 1e-3 : 1.0);
      params[i].mutable_grad() = g.clone();
      m[i] = m[i] * b1 + g * (1 - b1);
      v[i] = v[i] * b2 + g * g * (1 - b2);
      torch::Tensor u = (m[i] / c1) / ((v[i] / c2).sqrt() + eps);
      double ratio = 1;
      if (decayed[i]) {
        u = u + reference[i] * wd;
        const double w_norm = reference[i].norm().item<double>(), u_norm = u.norm().item<double>();
        if (w_norm > 0 && u_norm > 0) ratio = w_norm / u_norm;
      }
      const torch::Tensor before = reference[i].clone();
      reference[i] = reference[i] - u * (lr * ratio);
      bound[i] += kOps * kEpsF * (reference[i] - before).abs().max().item<double>() +
                  kEpsF * reference[i].abs().max().item<double>();
    }
    lamb.step();
    for (size_t i = 0; i < initial.size(); ++i) {
      EXPECT_LE((params[i] - reference[i]).abs().max().item<double>(), bound[i])
          << "parameter " << i << " after step " << t;
    }
  }
  EXPECT_FALSE(torch::allclose(params[0], initial[0], 1e-3, 1e-3)) << "the weights moved";
}

// Any layout: a strided parameter takes the same step as a contiguous one.
TEST(LambTest, AStridedParameterStepsAsAContiguousOne) {
  at::Tensor values = torch::randn({7, 5});
  at::Tensor strided = values.clone().t().detach().requires_grad_();
  at::Tensor contiguous = values.t().contiguous().requires_grad_();
  ASSERT_FALSE(strided.is_contiguous());
  const at::Tensor g = torch::randn({5, 7});
  strided.mutable_grad() = g.clone();
  contiguous.mutable_grad() = g.clone();
  Lamb a({strided}, LambOptions(0.01)), b({contiguous}, LambOptions(0.01));
  a.step();
  b.step();
  EXPECT_TRUE(torch::equal(strided, contiguous));
  EXPECT_FALSE(torch::allclose(contiguous, values.t(), 1e-4, 1e-4)) << "the weights moved";
}

}  // namespace
}  // namespace pbert::optim

namespace pbert::optim {
namespace {

// Random fp32 parameters of several shapes, for the tests below.
std::vector<torch::Tensor> RandomParams(uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({64, 48}), torch::randn({48}), torch::randn({3, 5, 7}),
          torch::zeros({9})};
}

// Clipping in the step (ScaleGradients) multiplies each gradient by the
// coefficient as ClipGradNorm does before the step: the same operation on
// the same numbers, so the same weights bit for bit.
TEST(LambTest, ScalingTheGradientsInTheStepEqualsClippingBefore) {
  std::vector<torch::Tensor> a = RandomParams(5), b;
  for (auto& p : a) {
    b.push_back(p.clone().requires_grad_());
    p.requires_grad_();
  }
  Lamb in_step = TwoGroups(a), before = TwoGroups(b);
  for (int t = 0; t < 3; ++t) {
    for (size_t i = 0; i < a.size(); ++i) {
      const torch::Tensor g = torch::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const torch::Tensor norm = ClipGradNorm(b, 0.5);  // scales b's gradients
    const torch::Tensor coefficient = ClipCoefficient(GlobalGradNorm(a), 0.5);
    ASSERT_TRUE(torch::equal(norm, GlobalGradNorm(a)));
    EXPECT_LT(coefficient.item<double>(), 1.0) << "clipping took place";
    in_step.ScaleGradients(coefficient);
    in_step.step();
    before.step();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i << " after step " << t + 1;
    }
  }
  EXPECT_FALSE(ClipCoefficient(GlobalGradNorm(a), 0).defined()) << "no limit: no coefficient";
}

// Master weights: fp32 parameters bound to bf16 copies step with the
// copies' bf16 gradients, exactly as fp32 parameters whose gradients are
// those bf16 values, and each copy is then its master rounded to bf16.
TEST(LambTest, MasterWeightsStepWithTheCopiesGradientsAndWriteTheCopies) {
  std::vector<torch::Tensor> masters = RandomParams(7), reference, copies;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
  for (auto& p : masters) {
    reference.push_back(p.clone().requires_grad_());
    copies.push_back(p.to(torch::kBFloat16).requires_grad_());
    p.requires_grad_();
    pairs.emplace_back(p, copies.back());
  }
  Lamb bound = TwoGroups(masters), plain = TwoGroups(reference);
  bound.BindModelWeights(pairs);
  for (int t = 0; t < 3; ++t) {
    for (size_t i = 0; i < masters.size(); ++i) {
      const torch::Tensor g = torch::randn(masters[i].sizes()).to(torch::kBFloat16);
      copies[i].mutable_grad() = g;
      reference[i].mutable_grad() = g.to(torch::kFloat);
    }
    const torch::Tensor coefficient = torch::full({}, 0.75, torch::kDouble);
    bound.ScaleGradients(coefficient);
    plain.ScaleGradients(coefficient);
    bound.step();
    plain.step();
    EXPECT_STREQ(bound.last_path(), "foreach");
    for (size_t i = 0; i < masters.size(); ++i) {
      EXPECT_FALSE(masters[i].grad().defined()) << "the masters keep no gradient of their own";
      EXPECT_TRUE(torch::equal(masters[i], reference[i])) << "master " << i << ", step " << t + 1;
      EXPECT_TRUE(torch::equal(copies[i], masters[i].to(torch::kBFloat16)))
          << "copy " << i << ", step " << t + 1;
    }
  }
  EXPECT_FALSE(torch::equal(masters[0], RandomParams(7)[0])) << "the weights moved";
}

}  // namespace
}  // namespace pbert::optim
