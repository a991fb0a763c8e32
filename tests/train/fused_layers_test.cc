// model/fused_layers.h on the CPU: its reference, whose backward is written
// by hand, against the unfused operations that autograd differentiates
// (bit for bit: the same ATen kernels in the same order), and a model with
// fused layers against one without. The kernels' side through the CPU
// twins (model::UseFusedLayerTwins): the code that launches the CUDA kernels
// and the autograd functions' kernel branch, run here. The CUDA kernels
// against this reference: tests/train/cuda_test.cc.
#include "model/fused_layers.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "model/dropout.h"
#include "model/task_heads.h"
#include "tests/model/fused_kernels_check.h"
#include "tests/model/qkv_buffer.h"
#include "tests/train/model_batches.h"

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

// A packed batch of rows of 3 for a tiny BERT of `options`.
data::PackedBatch PackedBatchFor(const BertOptions& options, uint64_t seed) {
  auto instances = testing::RandomInstances(5, 6, 20, options.vocab_size(), seed);
  const int max_len = static_cast<int>(options.max_position_embeddings());
  return *data::MakeBatch(testing::PackInOrder(instances, 3, max_len), {max_len, 3, 0});
}

// A BERT of `options` (weights seeded 2) in `dtype`, training on `batch`
// (dropout seeded 3: the same masks every time): its loss, then every
// parameter's gradient.
std::vector<at::Tensor> LossAndGradients(const BertOptions& options,
                                         const data::PackedBatch& batch, at::ScalarType dtype) {
  torch::manual_seed(2);
  BertForPreTraining model(options);
  model->to(dtype);
  model->train();
  torch::manual_seed(3);
  auto sums = testing::SumsOf(testing::Forward(model, batch), batch);
  at::Tensor loss = PretrainingLoss(sums, MlmLossMode::kPerToken, testing::TotalsOf(batch));
  loss.backward();
  std::vector<at::Tensor> out = {loss.detach()};
  for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
  return out;
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
  const data::PackedBatch batch = PackedBatchFor(options, 9);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const auto unfused = LossAndGradients(options.fused_layers(false), batch, dtype);
    const auto fused = LossAndGradients(options.fused_layers(true), batch, dtype);
    ASSERT_EQ(fused.size(), unfused.size());
    EXPECT_TRUE(torch::equal(fused[0], unfused[0])) << "the loss, " << c10::toString(dtype);
    for (size_t i = 1; i < fused.size(); ++i) {
      EXPECT_TRUE(torch::equal(fused[i], unfused[i]))
          << "parameter " << i - 1 << ", " << c10::toString(dtype);
    }
  }
}

// Q, K and V of each layer lie end to end in one buffer (model.fused_qkv,
// tests/model/qkv_buffer.h), after a move to another dtype too, whichever
// head holds the encoder (pretraining's, the span head, the classifier) and
// through the module base as the trainee moves it.
TEST(FusedLayersTest, QkvWeightsLieEndToEndAndJoinWithoutACopy) {
  BertForPreTraining pretraining(testing::TinyOptions());
  BertForQuestionAnswering span(testing::TinyOptions());
  BertForSequenceClassification classes(testing::TinyOptions(), 3);
  const std::vector<std::pair<std::string, torch::nn::Module*>> models = {
      {"pretraining", pretraining.ptr().get()},
      {"span head", span.ptr().get()},
      {"classifier", classes.ptr().get()}};
  const int64_t layers = testing::TinyOptions().num_layers();
  for (const auto& [name, model] : models) {
    testing::ExpectOneQkvBuffer(*model, layers, name);
    model->to(torch::kDouble);
    testing::ExpectOneQkvBuffer(*model, layers, name + " moved to double");
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

// The CPU through the kernels' twins while a test runs.
struct TwinsOn {
  TwinsOn() { UseFusedLayerTwins(true); }
  ~TwinsOn() { UseFusedLayerTwins(false); }
};

// With the twins on, the kernels' side runs on the CPU: the path is decided
// once (the model leaves the bias to the operation), the launching code and
// the autograd functions' kernel branch run, within the rounding of the
// kernels' arithmetic against double precision (the bounds the CUDA test
// holds the kernels to), and the twins read the dropout seed from its slot
// as the kernels do in a captured step (the reference draws with `seed`).
TEST(FusedLayersTest, TheKernelsPathThroughTheTwinsIsWithinRounding) {
  const at::Tensor x = torch::zeros({2, 64}), bias = torch::zeros({64});
  EXPECT_EQ(BiasGeluPath(x, bias), FusedPath::kReference);
  const Leaves l = MakeLeaves(at::kFloat);
  const uint64_t slot = 0x5107;
  const kernels::DropoutBits from_slot{0x1234, static_cast<uint32_t>(0.2 * 4294967296.0), &slot};
  at::Tensor twin;
  {
    TwinsOn twins;
    EXPECT_EQ(BiasGeluPath(x, bias), FusedPath::kKernels);
    EXPECT_EQ(BiasDropoutAddNormPath(x, bias, bias), FusedPath::kKernels);
    EXPECT_EQ(BiasGeluPath(x.to(at::kDouble), bias.to(at::kDouble)), FusedPath::kReference);
    EXPECT_EQ(BiasGeluPath(x, torch::zeros({kernels::kMaxGeluCols + 1})), FusedPath::kReference);
    testing::ExpectFusedKernelsWithinRounding(c10::kCPU, 301);
    twin = BiasDropoutAddNorm(l.y, l.bias, l.residual, l.gamma, l.beta, from_slot, 1e-12);
  }
  // The reference with the slot's seed, and with the field's.
  const kernels::DropoutBits slot_seed{slot, from_slot.threshold};
  const at::Tensor reference =
      BiasDropoutAddNorm(l.y, l.bias, l.residual, l.gamma, l.beta, slot_seed, 1e-12);
  const kernels::DropoutBits field_seed{from_slot.seed, from_slot.threshold};
  const at::Tensor other =
      BiasDropoutAddNorm(l.y, l.bias, l.residual, l.gamma, l.beta, field_seed, 1e-12);
  // The same mask as the slot's seed, another than the field's. The two
  // sum a row's 48 values in other orders in fp32: within 8 x 48 roundings
  // of the largest output (a mask of another seed is off by O(1)).
  const double size = reference.abs().max().item<double>();
  EXPECT_LE((twin - reference).abs().max().item<double>(), 8 * 48 * size / (1 << 24));
  EXPECT_GT((twin - other).abs().max().item<double>(), 0.1);
}

// model.fused_layers: auto, the default, is on where the layers run on a
// GPU only: on the CPU, with the kernels' twins in the kernels' place
// (whose rounding differs from the unfused modules'), the default model
// computes the unfused modules' loss bit for bit, and one set on does not.
TEST(FusedLayersTest, AutoLeavesTheCpuOnTheUnfusedModules) {
  auto options = testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.0);
  ASSERT_EQ(options.fused_layers(), Switch::kAuto);
  const data::PackedBatch batch = PackedBatchFor(options, 23);
  UseFusedLayerTwins(true);
  const auto automatic = LossAndGradients(options, batch, at::kFloat);
  const auto unfused = LossAndGradients(testing::TinyOptions().hidden_dropout(0.1)
                                            .attention_dropout(0.0).fused_layers(false),
                                        batch, at::kFloat);
  const auto fused = LossAndGradients(testing::TinyOptions().hidden_dropout(0.1)
                                          .attention_dropout(0.0).fused_layers(true),
                                      batch, at::kFloat);
  UseFusedLayerTwins(false);
  ASSERT_EQ(automatic.size(), unfused.size());
  for (size_t i = 0; i < automatic.size(); ++i) {
    EXPECT_TRUE(torch::equal(automatic[i], unfused[i])) << i;
  }
  bool differs = false;
  for (size_t i = 0; i < fused.size(); ++i) differs |= !torch::equal(fused[i], unfused[i]);
  EXPECT_TRUE(differs) << "the twins' path was not taken where the layers are on";
}

// A tiny BERT with fused layers whose operations run through the twins (the
// products without their biases, which the operations add), against the
// same model in double: within 4 times the reference's own distance from
// double (bit for bit the unfused modules in fp32) plus 8 fp32 ulps of each
// gradient's largest entry; the same dropout masks.
TEST(FusedLayersTest, AModelThroughTheTwinsEqualsTheReferenceWithinRounding) {
  auto options = testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.0).fused_layers(true);
  const data::PackedBatch batch = PackedBatchFor(options, 19);
  auto run = [&](at::ScalarType dtype, bool twins) {
    UseFusedLayerTwins(twins);
    std::vector<at::Tensor> out = LossAndGradients(options, batch, dtype);
    UseFusedLayerTwins(false);
    for (at::Tensor& t : out) t = t.to(at::kDouble);
    return out;
  };
  const auto exact = run(at::kDouble, false);
  const auto reference = run(at::kFloat, false);
  const auto twins = run(at::kFloat, true);
  ASSERT_EQ(twins.size(), exact.size());
  constexpr double kUlp = 1.0 / (1 << 23);
  for (size_t i = 0; i < exact.size(); ++i) {
    const double own = (reference[i] - exact[i]).abs().max().item<double>();
    const double size = exact[i].abs().max().item<double>();
    EXPECT_LE((twins[i] - exact[i]).abs().max().item<double>(), 4 * own + 8 * kUlp * size)
        << (i == 0 ? "the loss" : "gradient " + std::to_string(i - 1));
  }
  // Not the reference itself: the twins add the biases in their own pass.
  double apart = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    apart = std::max(apart, (twins[i] - reference[i]).abs().max().item<double>());
  }
  EXPECT_GT(apart, 0.0);
}

}  // namespace
}  // namespace pbert::model
