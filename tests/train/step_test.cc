// The training step through the real loss code: accumulation over
// micro-batches equals one batch of all of them, and packed rows give the
// gradients of unpacked ones.
#include "train/step.h"

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "tests/model/fixtures.h"

namespace pbert::train {
namespace {

using Rows = std::vector<std::vector<const data::Instance*>>;

struct Trainee {
  model::BertForPreTraining model{nullptr};
  std::unique_ptr<optim::Lamb> optimizer;
  std::unique_ptr<distributed::Communicator> communicator;
};

Trainee Make() {
  Trainee run;
  torch::manual_seed(21);
  run.model = model::BertForPreTraining(model::testing::TinyOptions());
  run.optimizer = std::make_unique<optim::Lamb>(
      optim::BertParamGroups(run.model->named_parameters(), optim::LambOptions(1e-2), true),
      optim::LambOptions(1e-2));
  run.communicator = *distributed::Communicator::Create(distributed::Environment{}, "gloo");
  return run;
}

std::vector<data::PackedBatch> Batches(const std::vector<Rows>& micro, int depth) {
  std::vector<data::PackedBatch> out;
  for (const Rows& rows : micro) out.push_back(*data::MakeBatch(rows, {64, depth, 0}));
  return out;
}

double MaxRelativeDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / (b.abs().max().item<double>() + 1e-12);
}

TEST(StepTest, AccumulatedMicroBatchesEqualOneBatchOfAll) {
  auto instances = model::testing::RandomInstances(24, 6, 30, 97, 3);
  Rows all;
  for (const auto& in : instances) all.push_back({&in});
  std::vector<Rows> four(4);
  for (size_t i = 0; i < all.size(); ++i) four[i / 6].push_back(all[i]);
  for (model::MlmLossMode mode : {model::MlmLossMode::kPerToken, model::MlmLossMode::kPerSequence}) {
    Trainee one = Make(), accumulated = Make();
    StepOptions options;
    options.mlm_loss = mode;
    options.max_grad_norm = 1.0;
    for (int step = 0; step < 3; ++step) {
      auto a = TrainStep(one.model, *one.optimizer, *one.communicator, Batches({all}, 1), 1e-2,
                         options);
      auto b = TrainStep(accumulated.model, *accumulated.optimizer, *accumulated.communicator,
                         Batches(four, 1), 1e-2, options);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_TRUE(a->applied && b->applied);
      EXPECT_NEAR(a->metrics.loss, b->metrics.loss, 1e-6 * a->metrics.loss) << "step " << step;
      EXPECT_NEAR(a->grad_norm, b->grad_norm, 1e-5 * a->grad_norm) << "step " << step;
      EXPECT_EQ(a->metrics.mlm_tokens, b->metrics.mlm_tokens);
      auto pa = one.model->named_parameters(), pb = accumulated.model->named_parameters();
      double largest = 0;
      for (const auto& p : pa) largest = std::max(largest, p.value().grad().abs().max().item<double>());
      for (size_t k = 0; k < pa.size(); ++k) {
        const at::Tensor& g = pa[k].value().grad();
        // The attention key bias has a zero gradient in exact arithmetic
        // (softmax ignores a shift shared by all keys): rounding noise in
        // both runs, which LAMB then scales up. It is not compared.
        if (g.abs().max().item<double>() < 1e-4 * largest) continue;
        EXPECT_LE(MaxRelativeDifference(pb[k].value().grad(), g), 1e-5)
            << "gradient of " << pa[k].key() << " at step " << step;
        EXPECT_LE(MaxRelativeDifference(pb[k].value(), pa[k].value()), 1e-4)
            << pa[k].key() << " after step " << step;
      }
    }
  }
}

// The paper's `batch` adjustment: the same sequences per step in half the
// micro-batches once packed. The first step's gradients agree.
TEST(StepTest, PackedRowsGiveTheGradientsOfUnpackedOnes) {
  auto instances = model::testing::RandomInstances(32, 4, 28, 97, 4);
  std::vector<Rows> unpacked(4);
  for (size_t i = 0; i < instances.size(); ++i) unpacked[i / 8].push_back({&instances[i]});
  std::vector<Rows> packed(2);
  for (size_t i = 0; i < instances.size(); i += 2) {
    packed[i / 16].push_back({&instances[i], &instances[i + 1]});
  }
  for (model::MlmLossMode mode : {model::MlmLossMode::kPerToken, model::MlmLossMode::kPerSequence}) {
    Trainee a = Make(), b = Make();
    StepOptions options;
    options.mlm_loss = mode;
    auto ra = TrainStep(a.model, *a.optimizer, *a.communicator, Batches(unpacked, 1), 1e-2, options);
    auto rb = TrainStep(b.model, *b.optimizer, *b.communicator, Batches(packed, 2), 1e-2, options);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->metrics.nsp_sequences, 32);
    EXPECT_EQ(rb->metrics.nsp_sequences, 32);
    EXPECT_EQ(rb->metrics.rows * 2, ra->metrics.rows);
    EXPECT_NEAR(ra->metrics.loss, rb->metrics.loss, 1e-6 * ra->metrics.loss);
    auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
    for (size_t k = 0; k < pa.size(); ++k) {
      const at::Tensor& ga = pa[k].value().grad();
      double scale = ga.abs().max().item<double>();
      EXPECT_LE((pb[k].value().grad() - ga).abs().max().item<double>(), 1e-5 * scale + 1e-9)
          << "gradient of " << pa[k].key();
    }
  }
}

TEST(StepTest, ANonFiniteLossSkipsTheUpdate) {
  Trainee run = Make();
  auto instances = model::testing::RandomInstances(4, 6, 20, 97, 5);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  {
    torch::NoGradGuard no_grad;
    run.model->cls->predictions->bias[7] = std::numeric_limits<float>::quiet_NaN();
  }
  auto before = run.model->bert->embeddings->word_embeddings->weight.clone();
  auto result = TrainStep(run.model, *run.optimizer, *run.communicator, Batches({rows}, 1), 1e-2,
                          StepOptions());
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->applied);
  EXPECT_TRUE(torch::equal(before, run.model->bert->embeddings->word_embeddings->weight));
}

}  // namespace
}  // namespace pbert::train
