#include "model/losses.h"

#include <torch/torch.h>

#include <cmath>

#include "gtest/gtest.h"

namespace pbert::model {
namespace {

// One row with two sequences (a third slot unused) and three masked tokens;
// cross-entropies chosen to be known in closed form.
struct Example {
  PretrainingTargets targets;
  StepTotals totals;
  PretrainingLogits logits;
};

Example MakeExample() {
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  Example e;
  e.targets.mlm_labels = torch::tensor({2, 0, 1}, torch::kLong);
  e.targets.mlm_owner = torch::tensor({0, 0, 1}, torch::kLong);  // sequences 1, 1, 2 of row 0
  e.targets.nsp_labels = torch::tensor({{0, 1, 0}}, torch::kLong);
  e.targets.nsp_valid = torch::tensor({{1, 1, 0}}, torch::kLong);
  // The counts the loader computes on the host: 3 masked tokens, in 2
  // sequences, of 2.
  e.totals = {3, 2, 2};
  // The three used slots' logits. CE: ln 3 (wrong: argmax 0, label 2),
  // ln 2 (right), ln 5/3 (right).
  e.logits.mlm = torch::tensor({{0.0, 0.0, 0.0}, {l2, 0.0, 0.0}, {0.0, l3, 0.0}}, torch::kFloat);
  // NSP: ln 2 each; the first right, the second wrong; the third unused.
  e.logits.nsp = torch::tensor({{{0.0, 0.0}, {0.0, 0.0}, {5.0, -5.0}}}, torch::kFloat);
  return e;
}

TEST(LossesTest, SumsAndCountsOfAHandComputedExample) {
  Example e = MakeExample();
  PretrainingSums s = ComputeSums(e.logits, e.targets);
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
  PretrainingSums s = ComputeSums(e.logits, e.targets);
  const double l2 = std::log(2.0), l3 = std::log(3.0), l53 = std::log(5.0 / 3.0);
  double per_token = PretrainingLoss(s, MlmLossMode::kPerToken, e.totals).item<double>();
  double per_sequence = PretrainingLoss(s, MlmLossMode::kPerSequence, e.totals).item<double>();
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
