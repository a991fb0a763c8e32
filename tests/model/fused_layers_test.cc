// model/fused_layers.h on the CPU: its reference, whose backward is written
// by hand, against the unfused operations that autograd differentiates
// (bit for bit: the same ATen kernels in the same order), and a model with
// fused layers against one without. The CUDA kernels against this
// reference: tests/train/cuda_test.cc.
#include "model/fused_layers.h"

#include <torch/torch.h>

#include <algorithm>
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

// Q, K and V of each layer lie end to end in one buffer (model.fused_qkv),
// still three leaf parameters under their names; after a move to another
// dtype too; JoinRows of them is an alias of that buffer, not a copy.
TEST(FusedLayersTest, QkvWeightsLieEndToEndAndJoinWithoutACopy) {
  BertForPreTraining model(testing::TinyOptions());
  for (bool moved : {false, true}) {
    if (moved) model->to(torch::kDouble);
    for (const auto& module : *model->bert->encoder->layer) {
      const auto& self = module->as<BertLayer>()->attention->self;
      const at::Tensor &q = self->query->weight, &k = self->key->weight, &v = self->value->weight;
      ASSERT_TRUE(q.is_leaf() && q.requires_grad());
      EXPECT_TRUE(q.storage().is_alias_of(v.storage()));
      EXPECT_EQ(k.storage_offset(), q.storage_offset() + q.numel());
      EXPECT_EQ(v.storage_offset(), k.storage_offset() + k.numel());
      const at::Tensor joined = JoinRows({q, k, v});
      EXPECT_EQ(joined.data_ptr(), q.data_ptr()) << "joined by a copy";
      EXPECT_TRUE(torch::equal(joined, at::cat({q, k, v}).detach()));
      EXPECT_EQ(self->key->bias.storage_offset(),
                self->query->bias.storage_offset() + self->query->bias.numel());
    }
  }
}

// JoinRows of tensors apart (a copy) and of tensors end to end (an alias):
// the same values, and each part's gradient is its rows of the whole's.
TEST(FusedLayersTest, JoinRowsSplitsTheGradientBackIntoItsParts) {
  torch::manual_seed(4);
  std::vector<at::Tensor> apart = {torch::randn({2, 3}), torch::randn({4, 3}),
                                   torch::randn({1, 3})};
  std::vector<at::Tensor> packed;
  for (auto& t : apart) {
    t.requires_grad_();
    packed.push_back(t.detach().clone().requires_grad_());
  }
  PackRows(packed);
  const at::Tensor grad = torch::randn({7, 3});
  for (const auto* parts : {&apart, &packed}) {
    const at::Tensor joined = JoinRows(*parts);
    EXPECT_TRUE(torch::equal(joined, at::cat(apart).detach()));
    (joined * grad).sum().backward();
    EXPECT_TRUE(torch::equal((*parts)[0].grad(), grad.narrow(0, 0, 2)));
    EXPECT_TRUE(torch::equal((*parts)[1].grad(), grad.narrow(0, 2, 4)));
    EXPECT_TRUE(torch::equal((*parts)[2].grad(), grad.narrow(0, 6, 1)));
  }
  EXPECT_EQ(JoinRows(packed).data_ptr(), packed[0].data_ptr());
  EXPECT_NE(JoinRows(apart).data_ptr(), apart[0].data_ptr());
}

// One [3h, h] product against three: the same initial weights (the same
// draws), and in double precision the same loss and gradients to the
// rounding of the products' other summation order (1e-12 of the largest;
// a wrong split of Q, K and V would be off by O(1)).
TEST(FusedLayersTest, OneQkvProductEqualsThree) {
  auto options = testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.1);
  auto instances = testing::RandomInstances(5, 6, 20, options.vocab_size(), 10);
  const int max_len = static_cast<int>(options.max_position_embeddings());
  auto batch = *data::MakeBatch(testing::PackInOrder(instances, 3, max_len), {max_len, 3, 0});
  for (AttentionKind kind : {AttentionKind::kDense, AttentionKind::kVarlen}) {
    std::vector<double> losses;
    std::vector<std::vector<at::Tensor>> weights, grads;
    for (bool fused : {false, true}) {
      torch::manual_seed(2);
      BertForPreTraining model(options.fused_qkv(fused).attention(kind));
      model->to(torch::kDouble);
      model->train();
      torch::manual_seed(3);
      auto sums = testing::SumsOf(testing::Forward(model, batch), batch);
      at::Tensor loss = PretrainingLoss(sums, MlmLossMode::kPerToken, testing::TotalsOf(batch));
      loss.backward();
      losses.push_back(loss.item<double>());
      weights.emplace_back();
      grads.emplace_back();
      for (const auto& p : model->parameters()) {
        weights.back().push_back(p.detach().clone());
        grads.back().push_back(p.grad().clone());
      }
    }
    EXPECT_NEAR(losses[1], losses[0], 1e-12 * losses[0]);
    // Relative to the largest gradient entry: some gradients are zero in
    // exact arithmetic (the key bias's), their noise of the others' size.
    double largest = 0;
    for (const auto& g : grads[0]) largest = std::max(largest, g.abs().max().item<double>());
    for (size_t i = 0; i < grads[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(weights[1][i], weights[0][i])) << "initial weight " << i;
      EXPECT_LE((grads[1][i] - grads[0][i]).abs().max().item<double>(), 1e-12 * largest)
          << "gradient " << i;
    }
  }
}

}  // namespace
}  // namespace pbert::model
