// The fine-tuning heads on packed rows (docs/finetuning.md): a packed row,
// laid out and given its task tensors as a run's loader does it, gives each
// sequence the span logits, the class logits, the losses and the gradients
// it gets alone, at depths 1-8, in every attention layout.
#include "model/task_heads.h"

#include <torch/torch.h>

#include <limits>

#include "gtest/gtest.h"
#include "data/batch.h"
#include "tasks/batches.h"
#include "tests/train/fine_tuning_fixtures.h"
#include "tests/train/model_batches.h"
#include "train/inputs.h"

namespace pbert::tasks {
namespace {

using model::AttentionKind;
using testing::HeadKind;
using model::BertForQuestionAnswering;
using model::BertForSequenceClassification;
using model::InputPlan;
using model::Inputs;
using model::Precision;
using model::SpanLogitsTensor;

using model::testing::TinyOptions;
using testing::RandomFeatures;

constexpr int kMaxLen = 64;

// Rows of at most `depth` features and kMaxLen tokens, in order.
std::vector<std::vector<int64_t>> Rows(const std::vector<Feature>& features, int depth) {
  std::vector<std::vector<int64_t>> rows(1);
  int used = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    const int n = features[i].sequence.length();
    if (static_cast<int>(rows.back().size()) == depth || used + n > kMaxLen) {
      rows.emplace_back();
      used = 0;
    }
    rows.back().push_back(static_cast<int64_t>(i));
    used += n;
  }
  return rows;
}

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
}

// One head's run on a batch: each sequence's logits (in feature order), the
// loss averaged over the sequences, the gradients of every parameter.
struct HeadRun {
  std::vector<at::Tensor> logits;
  double loss = 0;
  std::vector<at::Tensor> gradients;
};

template <class Model>
HeadRun RunHead(Model& model, const std::vector<Feature>& features, int depth,
                HeadKind head) {
  const auto rows = Rows(features, depth);
  std::vector<std::vector<const data::Instance*>> layout;
  std::vector<int64_t> records;
  for (const auto& row : rows) {
    layout.emplace_back();
    for (int64_t f : row) {
      layout.back().push_back(&features[f].sequence);
      records.push_back(f);
    }
  }
  auto batch = data::MakeBatch(layout, {kMaxLen, depth, 0});
  if (!batch.ok()) throw std::runtime_error(std::string(batch.status().message()));
  batch->records = records;
  const auto& weights = model->bert->embeddings->word_embeddings->weight;
  const InputPlan plan =
      InputPlan::For(model->options, weights.device(), Precision::kFp32, weights.scalar_type());
  Inputs inputs = train::MakeInputs(*batch, plan);
  const absl::Status added = head == HeadKind::kSpan
                                 ? AddSpanInputs(features, *batch, plan, &inputs)
                                 : AddClassInputs(features, head == HeadKind::kScore, *batch, &inputs);
  if (!added.ok()) throw std::runtime_error(std::string(added.message()));
  model->zero_grad();
  HeadRun run;
  run.logits.resize(features.size());
  TaskSums sums;
  if constexpr (std::is_same_v<Model, BertForQuestionAnswering>) {
    const SpanLogitsTensor spans = model(inputs);
    for (size_t i = 0; i < records.size(); ++i) {
      const int64_t f = records[i];
      const int64_t n = features[f].sequence.length();
      EXPECT_EQ(inputs.task[kSpanFeature][static_cast<int64_t>(i)].item<int64_t>(), f);
      run.logits[f] = at::stack({spans.start[i].narrow(0, 0, n), spans.end[i].narrow(0, 0, n)});
      // Padding slots of the span are out of every softmax.
      EXPECT_TRUE(spans.start[i].narrow(0, n, spans.start.size(1) - n).isinf().all().item<bool>());
    }
    sums = SpanSums(spans, inputs);
  } else {
    const at::Tensor logits = model(inputs);
    size_t i = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t k = 0; k < rows[r].size(); ++k) run.logits[records[i++]] = logits[r][k];
    }
    sums = ClassSums(logits, inputs, head == HeadKind::kScore);
  }
  EXPECT_EQ(sums.sequences.item<double>(), static_cast<double>(features.size()));
  const at::Tensor loss = sums.loss / sums.sequences;
  loss.backward();
  run.loss = loss.item<double>();
  for (const auto& p : model->parameters()) {
    run.gradients.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  return run;
}

template <class Model>
void ExpectSame(const HeadRun& alone, const HeadRun& packed, Model& model) {
  for (size_t i = 0; i < alone.logits.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(alone.logits[i], packed.logits[i]), 1e-5) << "logits of sequence " << i;
  }
  EXPECT_NEAR(alone.loss, packed.loss, 1e-6 * std::abs(alone.loss));
  const auto names = model->named_parameters();
  // A gradient that cancels (the span head's bias: each sequence's softmax
  // minus its one-hot sums to 0) is a sum whose terms are not small: per
  // sequence their magnitudes add up to at most 2, averaged over the
  // sequences. Its floor is fp32's epsilon times that bound.
  const double floor = 2 * std::numeric_limits<float>::epsilon() * 2;
  for (size_t k = 0; k < names.size(); ++k) {
    const double scale = alone.gradients[k].abs().max().item<double>();
    EXPECT_LE(MaxAbsDiff(alone.gradients[k], packed.gradients[k]), 1e-5 * scale + floor)
        << "gradient of " << names[k].key();
  }
}

template <class Model>
void CopyWeights(Model& from, Model& to) {
  torch::NoGradGuard no_grad;
  auto source = from->named_parameters();
  for (auto& p : to->named_parameters()) p.value().copy_(source[p.key()]);
}

class TaskHeadsTest : public ::testing::TestWithParam<std::tuple<int, AttentionKind>> {};

TEST_P(TaskHeadsTest, SpanHeadPackedEqualsAlone) {
  const auto [depth, attention] = GetParam();
  torch::manual_seed(depth);
  BertForQuestionAnswering model(TinyOptions().attention(AttentionKind::kDense));
  BertForQuestionAnswering twin(TinyOptions().attention(attention));
  CopyWeights(model, twin);
  const auto features = RandomFeatures(200 + depth);
  if (depth > 1) ASSERT_LT(Rows(features, depth).size(), features.size());
  const HeadRun alone = RunHead(model, features, 1, HeadKind::kSpan);
  const HeadRun packed = RunHead(twin, features, depth, HeadKind::kSpan);
  ExpectSame(alone, packed, twin);
  // The pooler takes no part in the span head.
  EXPECT_EQ(model->bert->pooler->dense->weight.grad().defined(), false);
}

TEST_P(TaskHeadsTest, ClassifierPackedEqualsAlone) {
  const auto [depth, attention] = GetParam();
  for (HeadKind head : {HeadKind::kClasses, HeadKind::kScore}) {
    torch::manual_seed(depth);
    const int64_t labels = head == HeadKind::kScore ? 1 : 3;
    BertForSequenceClassification model(TinyOptions().attention(AttentionKind::kDense), labels);
    BertForSequenceClassification twin(TinyOptions().attention(attention), labels);
    CopyWeights(model, twin);
    const auto features = RandomFeatures(300 + depth);
    const HeadRun alone = RunHead(model, features, 1, head);
    const HeadRun packed = RunHead(twin, features, depth, head);
    ExpectSame(alone, packed, twin);
  }
}

std::string DepthAndLayout(const ::testing::TestParamInfo<std::tuple<int, AttentionKind>>& info) {
  return "depth" + std::to_string(std::get<0>(info.param)) + "_" + NameOf(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Depths, TaskHeadsTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(AttentionKind::kDense,
                                                              AttentionKind::kBlocked,
                                                              AttentionKind::kVarlen)),
                         DepthAndLayout);

// The losses against their definitions, computed apart in double: the span
// loss is the mean over sequences of (CE(start) + CE(end)) / 2 over the
// sequence's own tokens; the classifier's the mean cross-entropy.
TEST(TaskLossTest, LossesAreTheirDefinitions) {
  const at::Tensor start = at::tensor({0.5, -1.0, 2.0, -INFINITY, 0.0, 1.0, 3.0, -0.5},
                                      at::kDouble).view({2, 4});
  const at::Tensor end = at::tensor({1.0, 0.0, -2.0, -INFINITY, 2.0, 2.0, 0.0, 1.0},
                                    at::kDouble).view({2, 4});
  Inputs inputs;
  inputs.task = {at::tensor({2, 0}, at::kLong), at::tensor({0, 3}, at::kLong),
                 at::ones({2}, at::kDouble), at::tensor({0, 1}, at::kLong)};
  const auto sums = SpanSums({start.to(at::kFloat), end.to(at::kFloat)}, inputs);
  auto ce = [](std::vector<double> logits, size_t label) {
    double z = 0;
    for (double l : logits) z += std::exp(l);
    return std::log(z) - logits[label];
  };
  const double expected = ((ce({0.5, -1.0, 2.0}, 2) + ce({1.0, 0.0, -2.0}, 0)) / 2 +
                           (ce({0.0, 1.0, 3.0, -0.5}, 0) + ce({2.0, 2.0, 0.0, 1.0}, 3)) / 2);
  EXPECT_NEAR(sums.loss.item<double>(), expected, 1e-6 * expected);  // fp32 logits
  // Sequence 0's start and end are its argmaxes; sequence 1's start is not.
  EXPECT_EQ(sums.correct.item<double>(), 1.0);
  EXPECT_EQ(sums.sequences.item<double>(), 2.0);
}

}  // namespace
}  // namespace pbert::tasks
