// model/fused_layers.h on the CPU: its reference, whose backward is written
// by hand, against the unfused operations that autograd differentiates
// (bit for bit: the same ATen kernels in the same order), and a model with
// fused layers against one without. The CUDA kernels against this
// reference: tests/train/cuda_test.cc.
#include "model/fused_layers.h"

#include <torch/torch.h>

#include <vector>

#include "gtest/gtest.h"
#include "model/dropout.h"
#include "tests/model/fixtures.h"

namespace pbert::model {
namespace {

struct Leaves {
  at::Tensor y, bias, residual, gamma, beta;
  std::vector<at::Tensor> All() const { return {y, bias, residual, gamma, beta}; }
};

// Inputs of one sublayer output, [2, 5, 48]: y in `act`, the rest fp32.
Leaves MakeLeaves(at::ScalarType act) {
  torch::manual_seed(21);
  auto leaf = [](at::Tensor t) { return t.detach().requires_grad_(); };
  Leaves l;
  l.y = leaf(torch::randn({2, 5, 48}).to(act));
  l.bias = leaf(torch::randn({48}));
  l.residual = leaf(torch::randn({2, 5, 48}));
  l.gamma = leaf(1 + 0.1 * torch::randn({48}));
  l.beta = leaf(0.1 * torch::randn({48}));
  return l;
}

// Each leaf's gradient for the output gradient `grad` of `out`.
std::vector<at::Tensor> Gradients(const at::Tensor& out, const at::Tensor& grad,
                                  const std::vector<at::Tensor>& leaves) {
  return torch::autograd::grad({out}, leaves, {grad}, /*retain_graph=*/false,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

TEST(FusedLayersTest, NormReferenceEqualsTheUnfusedOperationsBitForBit) {
  // fp32, and bf16 products with fp32 parameters (CPU autocast's dtypes).
  for (at::ScalarType act : {at::kFloat, at::kBFloat16}) {
    const Leaves l = MakeLeaves(act);
    const double p = 0.1, eps = 1e-12;
    torch::manual_seed(5);
    const at::Tensor fused =
        BiasDropoutAddNorm(l.y, l.bias, l.residual, l.gamma, l.beta, p, eps, /*training=*/true);
    torch::manual_seed(5);  // the same dropout seed
    const at::Tensor plain = at::layer_norm(Dropout(l.y + l.bias, p, true) + l.residual, {48},
                                            l.gamma, l.beta, eps);
    ASSERT_EQ(fused.scalar_type(), plain.scalar_type());
    EXPECT_TRUE(torch::equal(fused, plain)) << c10::toString(act);
    const at::Tensor grad = torch::randn(plain.sizes());
    const auto a = Gradients(fused, grad, l.All()), b = Gradients(plain, grad, l.All());
    const char* names[] = {"y", "bias", "residual", "gamma", "beta"};
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].defined()) << names[i];
      EXPECT_EQ(a[i].scalar_type(), b[i].scalar_type()) << names[i];
      EXPECT_TRUE(torch::equal(a[i], b[i])) << names[i] << " " << c10::toString(act);
    }
    // The mask did drop: about a tenth of y's gradient is zero.
    const double zeros = a[0].eq(0).to(at::kDouble).mean().item<double>();
    EXPECT_GT(zeros, 0.02);
    EXPECT_LT(zeros, 0.25);
  }
}

TEST(FusedLayersTest, WithoutDropoutOrInEvaluationNothingIsDrawn) {
  const Leaves l = MakeLeaves(at::kFloat);
  torch::manual_seed(8);
  const at::Tensor eval = BiasDropoutAddNorm(l.y, l.bias, l.residual, l.gamma, l.beta, 0.1, 1e-12,
                                             /*training=*/false);
  const at::Tensor after = torch::rand({1});
  torch::manual_seed(8);
  EXPECT_TRUE(torch::equal(after, torch::rand({1}))) << "evaluation drew from the generator";
  EXPECT_TRUE(torch::equal(
      eval, at::layer_norm(l.y + l.bias + l.residual, {48}, l.gamma, l.beta, 1e-12)));
}

TEST(FusedLayersTest, GeluReferenceEqualsTheUnfusedOperationsBitForBit) {
  for (at::ScalarType act : {at::kFloat, at::kBFloat16}) {
    const Leaves l = MakeLeaves(act);
    const at::Tensor fused = BiasGelu(l.y, l.bias);
    const at::Tensor plain = at::gelu(l.y + l.bias).to(act);
    ASSERT_EQ(fused.scalar_type(), act);
    EXPECT_TRUE(torch::equal(fused, plain)) << c10::toString(act);
    const at::Tensor grad = torch::randn(plain.sizes()).to(act);
    const auto a = Gradients(fused, grad, {l.y, l.bias}), b = Gradients(plain, grad, {l.y, l.bias});
    EXPECT_TRUE(torch::equal(a[0], b[0])) << "y " << c10::toString(act);
    EXPECT_TRUE(torch::equal(a[1], b[1])) << "bias " << c10::toString(act);
  }
}

// A tiny BERT with dropout, its layers fused or not, on the CPU: the same
// ATen kernels in the same order (the products keep their biases there), so
// the same loss and gradients, bit for bit, in fp32 and in double.
TEST(FusedLayersTest, AModelWithFusedLayersEqualsOneWithout) {
  auto options = testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.0);
  auto instances = testing::RandomInstances(5, 6, 20, options.vocab_size(), 9);
  const int max_len = static_cast<int>(options.max_position_embeddings());
  const auto rows = testing::PackInOrder(instances, 3, max_len);
  auto batch = *data::MakeBatch(rows, {max_len, 3, 0});
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    std::vector<at::Tensor> losses;
    std::vector<std::vector<at::Tensor>> grads;
    for (bool fused : {false, true}) {
      torch::manual_seed(2);
      BertForPreTraining model(options.fused_layers(fused));
      model->to(dtype);
      model->train();
      torch::manual_seed(3);  // the same dropout masks
      auto sums = testing::SumsOf(testing::Forward(model, batch), batch);
      at::Tensor loss = PretrainingLoss(sums, MlmLossMode::kPerToken, testing::TotalsOf(batch));
      loss.backward();
      losses.push_back(loss.detach());
      grads.emplace_back();
      for (const auto& p : model->parameters()) grads.back().push_back(p.grad().clone());
    }
    EXPECT_TRUE(torch::equal(losses[1], losses[0])) << c10::toString(dtype);
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(grads[1][i], grads[0][i]))
          << "parameter " << i << ", " << c10::toString(dtype);
    }
  }
}

}  // namespace
}  // namespace pbert::model
