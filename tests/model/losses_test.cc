#include "model/losses.h"

#include <torch/torch.h>

#include <cmath>

#include "gtest/gtest.h"

namespace pbert::model {
namespace {

// One row with two sequences (a third slot unused) and four MLM slots (the
// last unused); cross-entropies chosen to be known in closed form.
struct Example {
  data::PackedBatch batch;
  PretrainingLogits logits;
};

Example MakeExample() {
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  Example e;
  e.batch.mlm_labels = torch::tensor({{2, 0, 1, 0}}, torch::kLong);
  e.batch.mlm_sequence = torch::tensor({{1, 1, 2, 0}}, torch::kLong);
  e.batch.mlm_positions = torch::tensor({{1, 2, 6, 0}}, torch::kLong);
  e.batch.mlm_used = torch::tensor({0, 1, 2}, torch::kLong);
  e.batch.cls_positions = torch::tensor({{0, 5, 0}}, torch::kLong);
  e.batch.nsp_labels = torch::tensor({{0, 1, 0}}, torch::kLong);
  e.batch.nsp_valid = torch::tensor({{1, 1, 0}}, torch::kLong);
  // The counts the loader computes on the host: sequences of 5 and 3 tokens.
  e.batch.sequences = {{0, 0, 5}, {5, 5, 3}};
  e.batch.masked_sequences = 2;
  // The three used slots' logits. CE: ln 3 (wrong: argmax 0, label 2),
  // ln 2 (right), ln 5/3 (right).
  e.logits.mlm = torch::tensor({{0.0, 0.0, 0.0}, {l2, 0.0, 0.0}, {0.0, l3, 0.0}}, torch::kFloat);
  // NSP: ln 2 each; the first right, the second wrong; the third unused.
  e.logits.nsp = torch::tensor({{{0.0, 0.0}, {0.0, 0.0}, {5.0, -5.0}}}, torch::kFloat);
  return e;
}

TEST(LossesTest, SumsAndCountsOfAHandComputedExample) {
  Example e = MakeExample();
  PretrainingSums s = ComputeSums(e.logits, e.batch);
  const double l2 = std::log(2.0), l3 = std::log(3.0), l53 = std::log(5.0 / 3.0);
  EXPECT_NEAR(s.mlm_loss.item<double>(), l3 + l2 + l53, 1e-6);
  EXPECT_EQ(s.mlm_tokens.item<double>(), 3);
  EXPECT_EQ(s.mlm_correct.item<double>(), 2);
  EXPECT_NEAR(s.mlm_sequence_loss.item<double>(), (l3 + l2) / 2 + l53, 1e-6);
  EXPECT_EQ(s.mlm_sequences.item<double>(), 2);
  EXPECT_NEAR(s.nsp_loss.item<double>(), 2 * l2, 1e-6);
  EXPECT_EQ(s.nsp_sequences.item<double>(), 2);
  EXPECT_EQ(s.nsp_correct.item<double>(), 1);
}

TEST(LossesTest, TheTwoModesDiffer) {
  Example e = MakeExample();
  PretrainingSums s = ComputeSums(e.logits, e.batch);
  const double l2 = std::log(2.0), l3 = std::log(3.0), l53 = std::log(5.0 / 3.0);
  double per_token = PretrainingLoss(s, MlmLossMode::kPerToken, TotalsOf(e.batch)).item<double>();
  double per_sequence = PretrainingLoss(s, MlmLossMode::kPerSequence, TotalsOf(e.batch)).item<double>();
  EXPECT_NEAR(per_token, (l3 + l2 + l53) / 3 + l2, 1e-6);
  EXPECT_NEAR(per_sequence, ((l3 + l2) / 2 + l53) / 2 + l2, 1e-6);
  // Normalised by a step's totals (say 4 micro-batches like this one).
  StepTotals step{12, 8, 8};
  EXPECT_NEAR(PretrainingLoss(s, MlmLossMode::kPerToken, step).item<double>(),
              (l3 + l2 + l53) / 12 + 2 * l2 / 8, 1e-6);
}

TEST(LossesTest, ModeNames) {
  EXPECT_EQ(*ParseChoice<MlmLossMode>("per_sequence", "model.mlm_loss"),
            MlmLossMode::kPerSequence);
  EXPECT_EQ(NameOf(MlmLossMode::kPerToken), "per_token");
  EXPECT_FALSE(ParseChoice<MlmLossMode>("per_pack", "model.mlm_loss").ok());
}

}  // namespace
}  // namespace pbert::model
