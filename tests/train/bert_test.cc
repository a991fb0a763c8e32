// The core property (docs/model.md): a packed batch gives every sequence the
// logits, the losses and the gradients it gets alone.
#include "model/bert.h"

#include <torch/torch.h>

#include <limits>

#include "gtest/gtest.h"
#include "model/losses.h"
#include "model/precision.h"
#include "tests/train/model_batches.h"

namespace pbert::model {
namespace {

using pbert::testing::RandomInstances;
using testing::Forward;
using testing::InputsFor;
using testing::PackInOrder;
using testing::SumsOf;
using testing::TinyOptions;
using testing::TotalsOf;

constexpr int kMaxLen = 64;

data::PackedBatch Batch(const std::vector<std::vector<const data::Instance*>>& rows, int depth) {
  auto batch = data::MakeBatch(rows, {kMaxLen, depth, 0});
  EXPECT_TRUE(batch.ok()) << batch.status();
  return *batch;
}

// Each instance's logits, in instance order: MLM [masked, V] and NSP [2].
struct PerSequence {
  std::vector<at::Tensor> mlm, nsp;
};

PerSequence Split(const PretrainingLogits& logits,
                  const std::vector<std::vector<const data::Instance*>>& rows) {
  PerSequence out;
  int64_t used = 0;  // the MLM logits are those of the used slots, row after row
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t k = 0; k < rows[r].size(); ++k) {
      int64_t n = static_cast<int64_t>(rows[r][k]->masked_positions.size());
      out.mlm.push_back(logits.mlm.slice(0, used, used + n));
      out.nsp.push_back(logits.nsp[r][k]);
      used += n;
    }
  }
  return out;
}

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
}

// Packed rows (depth 1..8, attention dense, blocked or varlen) against
// every sequence alone in a row of its own (dense).
class EquivalenceTest : public ::testing::TestWithParam<std::tuple<int, AttentionKind>> {};

TEST_P(EquivalenceTest, PackedEqualsAloneInLogitsLossesAndGradients) {
  const auto [depth, attention] = GetParam();
  torch::manual_seed(depth);
  BertForPreTraining model(TinyOptions().attention(AttentionKind::kDense));
  // The same weights, attending in the layout under test.
  BertForPreTraining twin(TinyOptions().attention(attention));
  {
    torch::NoGradGuard no_grad;
    auto from = model->named_parameters();
    for (auto& p : twin->named_parameters()) p.value().copy_(from[p.key()]);
  }
  auto instances = RandomInstances(24, 6, 30, 97, 100 + depth);
  auto alone_rows = PackInOrder(instances, 1, kMaxLen);
  auto packed_rows = PackInOrder(instances, depth, kMaxLen);
  auto alone = Batch(alone_rows, 1);
  auto packed = Batch(packed_rows, depth);
  if (depth > 1) ASSERT_LT(packed.rows(), alone.rows());

  auto alone_logits = Forward(model, alone);
  // At depth 1 the packed batch is the unpacked one: it runs with the
  // key-padding mask [B,1,1,S] of an ordinary BERT (as Hugging Face builds
  // it) instead, so that even this case compares two different computations.
  const bool ordinary_bert = depth == 1 && attention == AttentionKind::kDense;
  auto padding_mask = packed.input_ids.ne(0).to(torch::kFloat).sub(1).mul(1e4).view(
      {packed.rows(), 1, 1, kMaxLen});
  Inputs packed_inputs = InputsFor(twin, packed);
  if (ordinary_bert) packed_inputs.attention = DenseMask{padding_mask};
  auto packed_logits = twin(packed_inputs);
  PerSequence a = Split(alone_logits, alone_rows), p = Split(packed_logits, packed_rows);
  ASSERT_EQ(a.mlm.size(), instances.size());
  for (size_t i = 0; i < instances.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(a.mlm[i], p.mlm[i]), 1e-5) << "MLM logits of sequence " << i;
    EXPECT_LE(MaxAbsDiff(a.nsp[i], p.nsp[i]), 1e-5) << "NSP logits of sequence " << i;
  }

  auto alone_sums = SumsOf(alone_logits, alone);
  auto packed_sums = SumsOf(packed_logits, packed);
  EXPECT_EQ(alone_sums.mlm_tokens.item<double>(), packed_sums.mlm_tokens.item<double>());
  EXPECT_EQ(alone_sums.mlm_sequences.item<double>(), packed_sums.mlm_sequences.item<double>());
  EXPECT_EQ(alone_sums.nsp_sequences.item<double>(), instances.size());
  for (MlmLossMode mode : {MlmLossMode::kPerToken, MlmLossMode::kPerSequence}) {
    model->zero_grad();
    auto alone_loss = PretrainingLoss(alone_sums, mode, TotalsOf(alone));
    alone_loss.backward({}, /*retain_graph=*/true);
    std::vector<at::Tensor> alone_grads;
    for (const auto& param : model->parameters()) alone_grads.push_back(param.grad().clone());
    twin->zero_grad();
    auto packed_loss = PretrainingLoss(packed_sums, mode, TotalsOf(packed));
    packed_loss.backward({}, /*retain_graph=*/true);
    EXPECT_NEAR(alone_loss.item<double>(), packed_loss.item<double>(),
                1e-6 * std::abs(alone_loss.item<double>()));
    auto names = twin->named_parameters();
    for (size_t k = 0; k < names.size(); ++k) {
      const at::Tensor& g = names[k].value().grad();
      double scale = alone_grads[k].abs().max().item<double>();
      EXPECT_LE(MaxAbsDiff(g, alone_grads[k]), 1e-5 * scale + 1e-9)
          << "gradient of " << names[k].key() << " (mode " << static_cast<int>(mode) << ")";
    }
  }
}

std::string DepthAndLayout(const ::testing::TestParamInfo<std::tuple<int, AttentionKind>>& info) {
  return "depth" + std::to_string(std::get<0>(info.param)) + "_" + NameOf(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Depths, EquivalenceTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(AttentionKind::kDense,
                                                              AttentionKind::kBlocked,
                                                              AttentionKind::kVarlen)),
                         DepthAndLayout);

// The varlen layout (the model on the real tokens only; attention in
// buckets of sequences, the CPU's reference for FlashAttention's kernel)
// against the dense one, in fp32, at depths 1-8, also under each ablation.
// The two compute the same sums in other orders, so each differs from the
// exact result by fp32 rounding. The tolerance comes from that rounding as
// the dense layout itself shows it: each output (MLM and NSP logits, each
// parameter's gradient) of varlen must lie within 4 times dense's own
// distance from the same model in double precision, plus 8 fp32 ulps of the
// output's size.
class VarlenTest : public ::testing::TestWithParam<std::tuple<int, Ablation>> {};

TEST_P(VarlenTest, EqualsDenseInFp32) {
  const auto [depth, ablation] = GetParam();
  constexpr double kEpsF = std::numeric_limits<float>::epsilon();
  torch::manual_seed(depth);
  auto options = TinyOptions().ablation(ablation);
  BertForPreTraining exact(options.attention(AttentionKind::kDense));
  BertForPreTraining dense(options.attention(AttentionKind::kDense));
  BertForPreTraining varlen(options.attention(AttentionKind::kVarlen));
  {
    torch::NoGradGuard no_grad;
    auto from = exact->named_parameters();
    for (auto* twin : {&dense, &varlen}) {
      for (auto& p : (*twin)->named_parameters()) p.value().copy_(from[p.key()]);
    }
  }
  exact->to(torch::kDouble);
  auto instances = RandomInstances(24, 6, 30, 97, 400 + depth);
  auto packed = Batch(PackInOrder(instances, depth, kMaxLen), depth);
  // Outputs in the order: MLM logits, NSP logits (of the slots that hold a
  // sequence), then every gradient.
  auto outputs = [&](BertForPreTraining& model) {
    model->zero_grad();
    PretrainingLogits logits = Forward(model, packed);
    PretrainingLoss(SumsOf(logits, packed), MlmLossMode::kPerToken, TotalsOf(packed)).backward();
    std::vector<at::Tensor> out = {
        logits.mlm.detach().to(torch::kDouble),
        logits.nsp.detach().to(torch::kDouble) * packed.nsp_valid.unsqueeze(-1)};
    for (const auto& p : model->parameters()) out.push_back(p.grad().to(torch::kDouble));
    return out;
  };
  const auto reference = outputs(exact), d = outputs(dense), v = outputs(varlen);
  auto names = exact->named_parameters();
  for (size_t i = 0; i < reference.size(); ++i) {
    const std::string what = i == 0 ? "MLM logits" : i == 1 ? "NSP logits"
                                                            : "gradient of " + names[i - 2].key();
    const double size = reference[i].abs().max().item<double>();
    const double tolerance = 4 * MaxAbsDiff(d[i], reference[i]) + 8 * kEpsF * size;
    EXPECT_LE(MaxAbsDiff(v[i], reference[i]), tolerance) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Depths, VarlenTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(Ablation::kNone,
                                                              Ablation::kNoBlockMask,
                                                              Ablation::kNoPositionReset)),
                         [](const ::testing::TestParamInfo<std::tuple<int, Ablation>>& info) {
                           return "depth" + std::to_string(std::get<0>(info.param)) + "_" +
                                  NameOf(std::get<1>(info.param));
                         });

// The same property under bf16 autocast (model.precision bf16, or auto on a
// CPU with bf16 in hardware). Both sides round to bf16 (8 significant bits),
// but not at the same places: a sum over a packed row's keys adds exact
// zeros for the other sequences, and blocked rows are shaped differently, so
// the matrix products round differently. The tolerance is bf16's: 1/32 of
// the largest logit (eight bf16 ulps), the loss within 1%, and each gradient
// within 5% of its largest entry (docs/model.md, Precision).
class Bf16EquivalenceTest : public ::testing::TestWithParam<std::tuple<int, AttentionKind>> {};

TEST_P(Bf16EquivalenceTest, PackedEqualsAloneWithinBf16Rounding) {
  if (!CpuRunsBf16().ok()) GTEST_SKIP() << "LibTorch cannot run bf16 here: " << CpuRunsBf16();
  const auto [depth, attention] = GetParam();
  torch::manual_seed(depth);
  BertForPreTraining model(TinyOptions().attention(attention));
  auto instances = RandomInstances(24, 6, 30, 97, 200 + depth);
  auto alone_rows = PackInOrder(instances, 1, kMaxLen);
  auto packed_rows = PackInOrder(instances, depth, kMaxLen);
  auto alone = Batch(alone_rows, 1);
  auto packed = Batch(packed_rows, depth);

  auto run = [&](const data::PackedBatch& batch, PretrainingLogits* logits) {
    model->zero_grad();
    at::Tensor loss;
    {
      AutocastGuard autocast(Precision::kBf16, c10::DeviceType::CPU);
      *logits = Forward(model, batch, Precision::kBf16);
      loss = PretrainingLoss(SumsOf(*logits, batch), MlmLossMode::kPerToken, TotalsOf(batch));
    }
    loss.backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    EXPECT_EQ(logits->mlm.scalar_type(), at::kBFloat16) << "autocast was not in effect";
    return std::make_pair(loss.item<double>(), grads);
  };
  PretrainingLogits alone_logits, packed_logits;
  auto [alone_loss, alone_grads] = run(alone, &alone_logits);
  auto [packed_loss, packed_grads] = run(packed, &packed_logits);
  PerSequence a = Split(alone_logits, alone_rows), p = Split(packed_logits, packed_rows);
  const double scale = alone_logits.mlm.abs().max().item<double>();
  for (size_t i = 0; i < instances.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(a.mlm[i].to(at::kFloat), p.mlm[i].to(at::kFloat)), scale / 32)
        << "MLM logits of sequence " << i;
    EXPECT_LE(MaxAbsDiff(a.nsp[i].to(at::kFloat), p.nsp[i].to(at::kFloat)), scale / 32)
        << "NSP logits of sequence " << i;
  }
  EXPECT_NEAR(alone_loss, packed_loss, 0.01 * std::abs(alone_loss));
  auto names = model->named_parameters();
  for (size_t k = 0; k < names.size(); ++k) {
    const double g = alone_grads[k].abs().max().item<double>();
    EXPECT_LE(MaxAbsDiff(packed_grads[k], alone_grads[k]), 0.05 * g + 1e-6)
        << "gradient of " << names[k].key();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Depths, Bf16EquivalenceTest,
    ::testing::Combine(::testing::Values(1, 2, 4, 8),
                       ::testing::Values(AttentionKind::kDense, AttentionKind::kBlocked,
                                         AttentionKind::kVarlen)),
    DepthAndLayout);

// The ablations leave out one of packing's model changes: then a packed
// sequence no longer gets the logits it gets alone.
TEST(AblationTest, EachAblationBreaksTheEquivalence) {
  for (Ablation ablation : {Ablation::kNoBlockMask, Ablation::kNoPositionReset}) {
    torch::manual_seed(9);
    BertForPreTraining model(TinyOptions());
    BertForPreTraining ablated(TinyOptions().ablation(ablation));
    {
      torch::NoGradGuard no_grad;
      auto from = model->named_parameters();
      for (auto& p : ablated->named_parameters()) p.value().copy_(from[p.key()]);
    }
    auto instances = RandomInstances(12, 6, 30, 97, 300);
    auto alone_rows = PackInOrder(instances, 1, kMaxLen);
    auto packed_rows = PackInOrder(instances, 4, kMaxLen);
    PerSequence a = Split(Forward(model, Batch(alone_rows, 1)), alone_rows);
    PerSequence same = Split(Forward(ablated, Batch(alone_rows, 1)), alone_rows);
    PerSequence p = Split(Forward(ablated, Batch(packed_rows, 4)), packed_rows);
    double worst = 0;
    for (size_t i = 0; i < instances.size(); ++i) {
      // A sequence alone in its row, or the first of a packed row, is not
      // affected: positions start at 0 and there is nothing else to attend.
      EXPECT_LE(MaxAbsDiff(a.mlm[i], same.mlm[i]), 1e-5) << "alone, sequence " << i;
      worst = std::max(worst, MaxAbsDiff(a.mlm[i], p.mlm[i]));
    }
    EXPECT_GT(worst, 1e-3) << "ablation " << static_cast<int>(ablation) << " changed nothing";
  }
}

TEST(BatchTest, PositionIdsRestartInEverySequence) {
  data::Instance a{{1, 2}, {0, 0}, {}, {}, 0};
  data::Instance b{{1, 7, 2}, {0, 1, 1}, {1}, {9}, 1};
  auto batch = data::MakeBatch({{&a, &b}}, {8, 2, 0});
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(
      torch::equal(batch->position_ids[0], torch::tensor({0, 1, 0, 1, 2, 0, 0, 0}, torch::kLong)));
  EXPECT_TRUE(
      torch::equal(batch->sequence_ids[0], torch::tensor({1, 1, 2, 2, 2, 0, 0, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch->cls_positions[0], torch::tensor({0, 2}, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch->mlm_positions[0], torch::tensor({3}, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch->mlm_sequence[0], torch::tensor({2}, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch->nsp_valid[0], torch::tensor({1, 1}, torch::kLong)));
  // The counts a loss divides by, made on the host, agree with the tensors.
  auto random = testing::RandomInstances(30, 4, 20, 97, 8);
  std::vector<std::vector<const data::Instance*>> rows(6);
  for (size_t i = 0; i < random.size(); ++i) rows[i % 6].push_back(&random[i]);
  auto many = data::MakeBatch(rows, {128, 5, 0});
  ASSERT_TRUE(many.ok());
  const StepTotals totals = TotalsOf(*many);
  EXPECT_EQ(totals.mlm_tokens, many->mlm_used.numel());
  EXPECT_EQ(totals.nsp_sequences, many->nsp_valid.sum().item<double>());
  const at::Tensor owners = many->mlm_used.div(many->mlm_positions.size(1), "floor") * 5 +
                            many->mlm_sequence.reshape({-1}).index_select(0, many->mlm_used) - 1;
  EXPECT_EQ(totals.mlm_sequences, std::get<0>(at::_unique(owners)).numel());
  EXPECT_GT(totals.mlm_tokens, 0);
  EXPECT_FALSE(data::MakeBatch({{&a, &b}}, {4, 2, 0}).ok());  // 5 tokens > 4
  EXPECT_FALSE(data::MakeBatch({{&a, &b}}, {8, 1, 0}).ok());  // 2 sequences > 1
}

TEST(MaskTest, BlockDiagonalBySequenceId) {
  auto mask = BlockDiagonalMask(torch::tensor({{1, 1, 2, 0}}, torch::kLong), torch::kFloat);
  auto allowed = (mask[0][0] == 0).to(torch::kLong);
  EXPECT_TRUE(torch::equal(
      allowed,
      torch::tensor({{1, 1, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, torch::kLong)));
}

TEST(CrossContaminationTest, ChangingOneSequenceLeavesTheOthersExactlyAlone) {
  torch::manual_seed(1);
  BertForPreTraining model(TinyOptions());
  auto instances = RandomInstances(3, 10, 20, 97, 7);
  instances[2].masked_positions = {3, 4};
  instances[2].masked_ids = {10, 11};
  std::vector<std::vector<const data::Instance*>> rows = {
      {&instances[0], &instances[1], &instances[2]}};
  auto before = Forward(model, Batch(rows, 3));
  instances[1].input_ids[3] = (instances[1].input_ids[3] + 17) % 97;
  instances[1].segment_ids[4] = 1 - instances[1].segment_ids[4];
  auto after = Forward(model, Batch(rows, 3));
  PerSequence b = Split(before, rows), a = Split(after, rows);
  EXPECT_TRUE(torch::equal(b.nsp[0], a.nsp[0]));
  EXPECT_TRUE(torch::equal(b.nsp[2], a.nsp[2]));
  EXPECT_TRUE(torch::equal(b.mlm[2], a.mlm[2]));
  EXPECT_FALSE(torch::equal(b.nsp[1], a.nsp[1]));  // the changed one does change
}

TEST(GradientCheckTest, CentralDifferencesInDoubleMatchAutograd) {
  torch::manual_seed(3);
  auto options = TinyOptions()
                     .fused_layers(true)  // their hand-written backward
                     .vocab_size(23)
                     .hidden_size(8)
                     .num_heads(2)
                     .intermediate_size(12)
                     .num_layers(1)
                     .max_position_embeddings(16);
  BertForPreTraining model(options);
  model->to(torch::kDouble);
  auto instances = RandomInstances(3, 4, 6, 23, 5);
  instances[0].masked_positions = {1};
  instances[0].masked_ids = {7};
  auto batch = *data::MakeBatch({{&instances[0], &instances[1]}, {&instances[2]}}, {16, 2, 0});
  auto loss_of = [&] {
    auto sums = SumsOf(Forward(model, batch), batch);
    return PretrainingLoss(sums, MlmLossMode::kPerSequence, TotalsOf(batch));
  };
  model->zero_grad();
  loss_of().backward();
  std::mt19937 rng(11);
  torch::NoGradGuard no_grad;
  int checked = 0;
  for (auto& item : model->named_parameters()) {
    at::Tensor w = item.value();
    auto flat = w.view(-1);
    auto grad = w.grad().view(-1);
    for (int k = 0; k < 3; ++k) {
      int64_t i = std::uniform_int_distribution<int64_t>(0, flat.numel() - 1)(rng);
      double saved = flat[i].item<double>();
      const double h = 1e-5;
      flat[i] = saved + h;
      double up = loss_of().item<double>();
      flat[i] = saved - h;
      double down = loss_of().item<double>();
      flat[i] = saved;
      double numeric = (up - down) / (2 * h);
      double analytic = grad[i].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric))
          << item.key() << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(model->parameters().size()));
}

}  // namespace
}  // namespace pbert::model
