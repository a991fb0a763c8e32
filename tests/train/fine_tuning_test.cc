// Fine-tuning through the one training step with each lever that runs on
// the CPU, against the plain step: the captured step's stand-in (bit for
// bit, as pretraining's), static shapes and the fused layers' kernel twins
// (within the rounding of their arithmetic against double precision), bf16
// master weights (within bf16's rounding of double precision) and fp8's
// emulation (every encoder product of the task's model in fp8). The span
// head and the classifier both; the levers act on the encoder, so every
// head has them (docs/finetuning.md, One loop).
#include <torch/torch.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/torch_compat.h"
#include "gtest/gtest.h"
#include "model/fused_layers.h"
#include "model/precision.h"
#include "tests/model/qkv_buffer.h"
#include "tests/train/fine_tuning_fixtures.h"
#include "tests/train/host_graph.h"
#include "train/step.h"
#include "train/trainee.h"

namespace pbert::train::tuning {
namespace {

using tasks::testing::HeadKind;
using tasks::testing::StepBatches;
using tasks::testing::TaskOf;

constexpr double kLr = 1e-2;

using tasks::testing::HeadName;

// A trainee of `task` on a tiny BERT with dropout 0.1, seeded alike.
struct TuningRun {
  std::unique_ptr<distributed::Communicator> communicator = distributed::Communicator::Single();
  std::unique_ptr<Trainee> trainee;
};

TraineeOptions Options(std::shared_ptr<const tasks::Task> task, model::BertOptions bert,
                       c10::ScalarType dtype) {
  TraineeOptions o;
  o.task = std::move(task);
  o.bert = bert;
  o.lamb = optim::LambOptions(kLr).trust_ratio(false);  // AdamW, fine-tuning's
  o.seed = 31;
  o.dtype = dtype;
  return o;
}

TuningRun Make(const TraineeOptions& options) {
  TuningRun run;
  auto made = Trainee::Make(options, *run.communicator);
  EXPECT_TRUE(made.ok()) << made.status();
  if (made.ok()) run.trainee = std::move(*made);
  return run;
}

model::BertOptions WithDropout() {
  return model::testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.1);
}

// Every parameter's gradient, then the step's loss, in double.
std::vector<at::Tensor> LossAndGradients(Trainee& trainee, const StepResult& step) {
  std::vector<at::Tensor> out = {at::scalar_tensor(step.metrics.loss, at::kDouble)};
  for (const auto& p : trainee.model().parameters()) {
    out.push_back(p.grad().defined() ? p.grad().to(at::kDouble) : at::zeros_like(p, at::kDouble));
  }
  return out;
}

class FineTuningStepTest : public ::testing::TestWithParam<HeadKind> {};

// The captured step's stand-in (tests/train/host_graph.h) on fine-tuning
// steps: the task's tensors (the span head's token grid and targets, the
// classifier's labels) among the graph's buffers, refilled for each
// micro-batch; in double with dropout, dense attention with static shapes,
// two micro-batches a step: the same losses, sums, gradients and weights
// as eager steps, bit for bit, and nothing a graph cannot hold.
TEST_P(FineTuningStepTest, TheCapturedStandInEqualsEagerStepsBitForBit) {
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(41, 120), head, 3);
  const tasks::PackedSet& set = *task->train();
  auto recorded = std::make_shared<int>(0);
  auto watch = std::make_shared<pbert::testing::GraphWatch>();
  auto make = [&](bool graphs) {
    TraineeOptions o = Options(task,
                               WithDropout().attention(model::AttentionKind::kDense)
                                   .fused_layers(true).static_shapes(true),
                               torch::kDouble);
    o.cuda_graphs = graphs;
    o.graph_recorder = pbert::testing::HostGraphs(recorded, watch);
    return Make(o);
  };
  constexpr int kSteps = 5;
  std::vector<StepResult> eager_results, captured_results;
  TuningRun eager = make(false);
  for (int step = 0; step < kSteps; ++step) {
    auto r = TrainStep(*eager.trainee, *eager.communicator, StepBatches(set, step, 4, 2), kLr, {},
                       &set);
    ASSERT_TRUE(r.ok()) << r.status();
    eager_results.push_back(*r);
  }
  TuningRun captured = make(true);
  for (int step = 0; step < kSteps; ++step) {
    auto r = TrainStep(*captured.trainee, *captured.communicator, StepBatches(set, step, 4, 2), kLr,
                       {}, &set);
    ASSERT_TRUE(r.ok()) << r.status();
    captured_results.push_back(*r);
  }
  EXPECT_EQ(*recorded, 1) << "one shape: one graph";
  EXPECT_TRUE(watch->problems.empty()) << watch->problems.front();
  for (int step = 0; step < kSteps; ++step) {
    const StepResult &a = eager_results[step], &b = captured_results[step];
    EXPECT_EQ(a.metrics.loss, b.metrics.loss) << "step " << step;
    EXPECT_EQ(a.metrics.sums, b.metrics.sums) << "step " << step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
    EXPECT_GT(a.metrics.sums[0], 0) << "sequences trained";
  }
  auto pa = eager.trainee->model().named_parameters();
  auto pb = captured.trainee->model().named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_TRUE(torch::equal(pa[k].value(), pb[k].value())) << pa[k].key();
  }
}

// Static shapes (every micro-batch padded to one shape: the span head's
// grid to B*D sequences of S slots, the padding sequences of weight 0): the
// same losses and gradients as without, within the rounding of sums taken
// over more terms, in double: 2^16 terms at most, each of the size of the
// largest gradient entry or smaller (tests/train/step_test.cc's bound).
TEST_P(FineTuningStepTest, StaticShapesChangeNoLossOrGradient) {
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(42, 60), head, 3);
  const tasks::PackedSet& set = *task->train();
  for (model::AttentionKind kind : {model::AttentionKind::kDense, model::AttentionKind::kVarlen}) {
    TuningRun plain = Make(Options(task, model::testing::TinyOptions().attention(kind), torch::kDouble));
    TuningRun fixed = Make(Options(task, model::testing::TinyOptions().attention(kind).static_shapes(true),
                             torch::kDouble));
    for (int step = 0; step < 3; ++step) {
      const auto batches = StepBatches(set, step, 4, 1);
      auto a = TrainStep(*plain.trainee, *plain.communicator, batches, kLr, {}, &set);
      auto b = TrainStep(*fixed.trainee, *fixed.communicator, batches, kLr, {}, &set);
      ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status());
      const auto ga = LossAndGradients(*plain.trainee, *a);
      const auto gb = LossAndGradients(*fixed.trainee, *b);
      double largest = 0;
      for (size_t i = 1; i < ga.size(); ++i) largest = std::max(largest, ga[i].abs().max().item<double>());
      const double tolerance = (1 << 16) * std::numeric_limits<double>::epsilon();
      const std::string where = absl::StrCat(HeadName(head), ", layout ", static_cast<int>(kind),
                                             ", step ", step);
      EXPECT_NEAR(a->metrics.loss, b->metrics.loss, tolerance * a->metrics.loss) << where;
      EXPECT_EQ(a->metrics.sums, b->metrics.sums) << where;
      for (size_t i = 1; i < ga.size(); ++i) {
        EXPECT_LE((ga[i] - gb[i]).abs().max().item<double>(), tolerance * largest)
            << where << ", gradient " << i - 1;
      }
    }
  }
}

// The fused layers through the kernels' CPU twins in fp32, against the same
// step in double: within 4 times the plain fp32 step's own distance from
// double plus 8 fp32 ulps of each gradient's largest entry (as the
// pretraining model's test, tests/train/fused_layers_test.cc); the same
// dropout masks, drawn from the same seeds.
TEST_P(FineTuningStepTest, TheFusedLayersTwinsAreWithinRoundingOfDoublePrecision) {
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(43, 40), head, 3);
  const tasks::PackedSet& set = *task->train();
  const model::BertOptions bert =
      model::testing::TinyOptions().hidden_dropout(0.1).fused_layers(true);
  auto run = [&](c10::ScalarType dtype, bool twins) {
    model::UseFusedLayerTwins(twins);
    TuningRun r = Make(Options(task, bert, dtype));
    auto step = TrainStep(*r.trainee, *r.communicator, StepBatches(set, 0, 6, 1), kLr, {}, &set);
    model::UseFusedLayerTwins(false);
    EXPECT_TRUE(step.ok()) << step.status();
    return LossAndGradients(*r.trainee, *step);
  };
  const auto exact = run(at::kDouble, false);
  const auto reference = run(at::kFloat, false);
  const auto twins = run(at::kFloat, true);
  ASSERT_EQ(twins.size(), exact.size());
  constexpr double kUlp = 1.0 / (1 << 23);
  double apart = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double own = (reference[i] - exact[i]).abs().max().item<double>();
    const double size = exact[i].abs().max().item<double>();
    EXPECT_LE((twins[i] - exact[i]).abs().max().item<double>(), 4 * own + 8 * kUlp * size)
        << HeadName(head) << ", " << (i == 0 ? "the loss" : "gradient " + std::to_string(i - 1));
    apart = std::max(apart, (twins[i] - reference[i]).abs().max().item<double>());
  }
  EXPECT_GT(apart, 0.0) << "the twins ran";
}

// bf16 with fp32 master weights: the model computes with bf16 weights, the
// optimizer updates fp32 masters. Against the step in double from the same
// weights: every product rounds its inputs to bf16 (u = 2^-9 each) and
// sums in fp32, and along the tiny BERT's deepest chain, two layers
// forward and back with the head, about 64 such roundings add up: the
// loss within 64 u of itself, each gradient within 64 u of the largest
// entry (tests/train/step_test.cc's bound), or of 1 where that is more:
// the span head's bias gradient cancels (each sequence's softmax minus its
// one-hot sums to 0), a sum of terms of up to 1 that is near 0 itself.
TEST_P(FineTuningStepTest, MasterWeightsAreWithinBf16RoundingOfDoublePrecision) {
  if (!model::CpuRunsBf16().ok()) {
    GTEST_SKIP() << "this CPU does not compute bf16 (" << model::CpuRunsBf16().message() << ")";
  }
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(44, 40), head, 3);
  const tasks::PackedSet& set = *task->train();
  TuningRun reference = Make(Options(task, model::testing::TinyOptions(), torch::kDouble));
  TraineeOptions o = Options(task, model::testing::TinyOptions(), torch::kFloat);
  o.precision = model::Precision::kBf16;
  o.master_weights = true;
  TuningRun masters = Make(o);
  ASSERT_TRUE(masters.trainee->has_master_weights());
  for (const auto& p : masters.trainee->model().parameters()) {
    ASSERT_EQ(p.scalar_type(), torch::kBFloat16);
  }
  const auto batches = StepBatches(set, 0, 6, 1);
  auto r = TrainStep(*reference.trainee, *reference.communicator, batches, kLr, {}, &set);
  auto m = TrainStep(*masters.trainee, *masters.communicator, batches, kLr, {}, &set);
  ASSERT_TRUE(r.ok() && m.ok()) << (r.ok() ? m.status() : r.status());
  constexpr double kU = 1.0 / 512, kRounded = 64;
  EXPECT_NEAR(m->metrics.loss, r->metrics.loss, kRounded * kU * r->metrics.loss) << HeadName(head);
  const auto gr = LossAndGradients(*reference.trainee, *r);
  const auto gm = LossAndGradients(*masters.trainee, *m);
  double largest = 1;
  for (size_t i = 1; i < gr.size(); ++i) largest = std::max(largest, gr[i].abs().max().item<double>());
  for (size_t i = 1; i < gr.size(); ++i) {
    EXPECT_LE((gm[i] - gr[i]).abs().max().item<double>(), kRounded * kU * largest)
        << HeadName(head) << ", gradient " << i - 1;
  }
  // The masters stay fp32 and took the update; the model holds their bf16.
  auto weights = masters.trainee->weights().named_parameters();
  for (const auto& item : masters.trainee->model().named_parameters()) {
    EXPECT_EQ(weights[item.key()].scalar_type(), torch::kFloat) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), weights[item.key()].to(torch::kBFloat16)))
        << item.key();
  }
}

// fp8 (emulated on the CPU): a fine-tuning step runs every product of the
// task model's encoder in fp8 (each records the largest magnitude of its
// input, weight and output gradient into the history the step ends with)
// and trains: a finite loss, not the bf16 step's (the operands were
// rounded to e4m3). The products' own arithmetic against double precision
// is Fp8Test.TheEmulatedProductEqualsADoublePrecisionComputationOfTheQuantizedValues.
TEST_P(FineTuningStepTest, Fp8RunsEveryProductOfTheTaskModelsEncoder) {
  if (!PBERT_TORCH_AT_LEAST(2, 1)) {
    GTEST_SKIP() << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                 << " has no float8 dtypes (2.1 and later): fp8 is refused in this build";
  }
  if (!model::CpuRunsBf16().ok()) {
    GTEST_SKIP() << "this CPU does not compute bf16 (" << model::CpuRunsBf16().message() << ")";
  }
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(45, 40), head, 3);
  const tasks::PackedSet& set = *task->train();
  TraineeOptions o = Options(task, model::testing::TinyOptions(), torch::kFloat);
  o.precision = model::Precision::kBf16;
  TuningRun bf16 = Make(o);
  o.precision = model::Precision::kFp8;
  o.fp8.emulation = true;
  TuningRun fp8 = Make(o);
  ASSERT_NE(fp8.trainee->fp8(), nullptr);
  const auto batches = StepBatches(set, 0, 6, 1);
  auto a = TrainStep(*bf16.trainee, *bf16.communicator, batches, kLr, {}, &set);
  auto b = TrainStep(*fp8.trainee, *fp8.communicator, batches, kLr, {}, &set);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status());
  ASSERT_TRUE(std::isfinite(b->metrics.loss));
  EXPECT_NE(b->metrics.loss, a->metrics.loss) << HeadName(head);
  // The newest maxima: [products, roles].
  const at::Tensor newest = fp8.trainee->fp8()->history()[0];
  EXPECT_EQ(newest.size(0), model::BertModelImpl::Fp8Products(o.bert));
  EXPECT_TRUE(newest.gt(0).all().item<bool>())
      << "a product of the encoder did not run in fp8: " << newest;
}

// The task models' Q, K and V stay one buffer (tests/model/qkv_buffer.h)
// through the trainee's move (to double; to bf16 beside fp32 master
// weights, where the CPU computes bf16) and through optimizer steps, in
// the model the step computes with and in the weights LAMB updates. The
// move to a GPU: CudaTest.TheTaskModelsKeepOneQkvBufferOnTheGpu.
TEST_P(FineTuningStepTest, TheQkvBufferStaysOneThroughTheMoveAndTheSteps) {
  const HeadKind head = GetParam();
  const auto task = TaskOf(tasks::testing::RandomFeatures(46, 40), head, 3);
  const tasks::PackedSet& set = *task->train();
  const int64_t layers = model::testing::TinyOptions().num_layers();
  for (const bool masters : {false, true}) {
    if (masters && !model::CpuRunsBf16().ok()) continue;
    TraineeOptions o =
        Options(task, model::testing::TinyOptions(), masters ? torch::kFloat : torch::kDouble);
    if (masters) {
      o.precision = model::Precision::kBf16;
      o.master_weights = true;
    }
    TuningRun run = Make(o);
    ASSERT_NE(run.trainee, nullptr);
    const std::string what = HeadName(head) + (masters ? ", bf16 with master weights" : ", double");
    for (int step = 0; step < 3; ++step) {
      const std::string when = what + (step == 0 ? ", as made" : ", after a step");
      model::testing::ExpectOneQkvBuffer(run.trainee->model(), layers, when);
      model::testing::ExpectOneQkvBuffer(run.trainee->weights(), layers, when + " (weights)");
      auto r =
          TrainStep(*run.trainee, *run.communicator, StepBatches(set, step, 4, 1), kLr, {}, &set);
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
}

// Packed rows (lpfhp, up to 3 sequences a row) against one sequence a row,
// in double without dropout: the same sequences a step (the packed step's
// rows hold the features of the unpacked step's, StepBatches of the
// unpacked set's records made into the packed layout), so the same loss,
// sums and gradients, within the rounding of sums over the step's tokens
// (at most 2^12 terms here, each no larger than the largest entry).
TEST_P(FineTuningStepTest, PackedStepsEqualUnpackedSteps) {
  const HeadKind head = GetParam();
  const auto features = tasks::testing::RandomFeatures(47, 48);
  const auto unpacked = TaskOf(features, head, 1);
  const auto packed = TaskOf(features, head, 3);
  const tasks::PackedSet& one = *unpacked->train();
  const tasks::PackedSet& three = *packed->train();
  ASSERT_LT(three.rows->rows(), one.rows->rows());
  TuningRun a = Make(Options(unpacked, model::testing::TinyOptions(), torch::kDouble));
  TuningRun b = Make(Options(packed, model::testing::TinyOptions(), torch::kDouble));
  // The whole set in one step: the unpacked rows in two micro-batches (48
  // features: 24 rows each), the packed rows in one.
  const int rows_a = static_cast<int>(one.rows->rows() / 2);
  ASSERT_EQ(2 * rows_a, static_cast<int>(one.rows->rows()));
  const int rows_b = static_cast<int>(three.rows->rows());
  for (int step = 0; step < 2; ++step) {
    auto ra = TrainStep(*a.trainee, *a.communicator, StepBatches(one, 0, rows_a, 2), kLr, {}, &one);
    auto rb =
        TrainStep(*b.trainee, *b.communicator, StepBatches(three, 0, rows_b, 1), kLr, {}, &three);
    ASSERT_TRUE(ra.ok() && rb.ok()) << (ra.ok() ? rb.status() : ra.status());
    const auto ga = LossAndGradients(*a.trainee, *ra);
    const auto gb = LossAndGradients(*b.trainee, *rb);
    double largest = 0;
    for (size_t i = 1; i < ga.size(); ++i) largest = std::max(largest, ga[i].abs().max().item<double>());
    const double tolerance = (1 << 12) * std::numeric_limits<double>::epsilon();
    const std::string where = absl::StrCat(HeadName(head), ", step ", step);
    EXPECT_NEAR(ra->metrics.loss, rb->metrics.loss, tolerance * ra->metrics.loss) << where;
    ASSERT_EQ(ra->metrics.sums.size(), rb->metrics.sums.size());
    for (size_t k = 0; k < ra->metrics.sums.size(); ++k) {
      EXPECT_NEAR(ra->metrics.sums[k], rb->metrics.sums[k], 1e-9 * std::abs(ra->metrics.sums[k]))
          << where << ", sum " << k;
    }
    for (size_t i = 1; i < ga.size(); ++i) {
      EXPECT_LE((ga[i] - gb[i]).abs().max().item<double>(), tolerance * largest)
          << where << ", gradient " << i - 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, FineTuningStepTest,
                         ::testing::Values(HeadKind::kSpan, HeadKind::kClasses, HeadKind::kTokens,
                                           HeadKind::kMultiLabel),
                         [](const ::testing::TestParamInfo<HeadKind>& info) {
                           return HeadName(info.param);
                         });

}  // namespace
}  // namespace pbert::train::tuning
