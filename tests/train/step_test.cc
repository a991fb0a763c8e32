// The training step through the real loss code: accumulation over
// micro-batches equals one batch of all of them, and packed rows give the
// gradients of unpacked ones.
//
// Both are identities of exact arithmetic: the two sides only add the same
// terms in another order. The tests run in double precision, so that the
// difference is rounding alone, whatever matrix kernels the CPU runs: for a
// sum of n terms at most n * eps * (sum of |terms|) (Higham, Accuracy and
// Stability of Numerical Algorithms, 3.1), with eps = 2^-52. The deepest sum
// here, a weight gradient over every token of the step and a feed-forward
// width, has under kTerms terms, of the size of the model's largest gradient
// entry or smaller: kTerms * eps times that entry bounds every gradient's
// difference. (Some gradients are zero in exact arithmetic, such as the
// attention key bias's, which softmax ignores: their rounding noise comes
// from terms of the others' size, not from their own.)
#include "train/step.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/packing/pack.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "model/fused_layers.h"
#include "model/precision.h"
#include "model/weights.h"
#include "optim/lamb.h"
#include "tests/train/model_batches.h"
#include "tests/train/host_graph.h"
#include "tests/train/pretraining_view.h"
#include "tests/train/resume_run.h"
#include "tests/train/same_step.h"
#include "train/captured_step.h"
#include "train/checkpointer.h"
#include "train/evaluator.h"
#include "train/host_read.h"
#include "train/inputs.h"
#include "train/trainer_state.h"

namespace pbert::train {
namespace {

using Rows = std::vector<std::vector<const data::Instance*>>;
using pbert::testing::Pretraining;

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kTerms = 1 << 16;  // > 24 sequences x 30 tokens x FFN width 64
constexpr double kGradientTolerance = kTerms * kEps;  // relative to the largest gradient
constexpr double kLr = 1e-2;

// A tiny BERT, alone (one process): in double precision, or as asked.
struct Alone {
  std::unique_ptr<distributed::Communicator> communicator;
  std::unique_ptr<Trainee> trainee;
  model::BertForPreTraining model() { return pbert::testing::PretrainingModel(trainee->model()); }
};

Alone Make(c10::ScalarType dtype = torch::kDouble,
           model::Precision precision = model::Precision::kFp32, bool master_weights = false,
           model::MlmLossMode mode = model::MlmLossMode::kPerToken) {
  Alone run;
  run.communicator = distributed::Communicator::Single();
  TraineeOptions options;
  options.bert = model::testing::TinyOptions();
  options.lamb = optim::LambOptions(kLr);
  options.seed = 21;
  options.dtype = dtype;
  options.precision = precision;
  options.master_weights = master_weights;
  options.task = tasks::PretrainingOn({}, mode);
  run.trainee = std::move(*Trainee::Make(options, *run.communicator));
  return run;
}

// A tiny BERT alone made from `o`.
Alone MakeAlone(const TraineeOptions& o) {
  Alone run;
  run.communicator = distributed::Communicator::Single();
  auto trainee = Trainee::Make(o, *run.communicator);
  EXPECT_TRUE(trainee.ok()) << trainee.status();
  run.trainee = std::move(*trainee);
  return run;
}

// `bert` with dropout 0.1 in the hidden states and attention, in double
// precision at rate kLr, seeded with `seed`.
TraineeOptions WithDropout(model::BertOptions bert, uint64_t seed) {
  TraineeOptions o;
  o.bert = bert.hidden_dropout(0.1).attention_dropout(0.1);
  o.lamb = optim::LambOptions(kLr);
  o.seed = seed;
  o.dtype = torch::kDouble;
  return o;
}

std::vector<data::PackedBatch> Batches(const std::vector<Rows>& micro, int depth) {
  std::vector<data::PackedBatch> out;
  for (const Rows& rows : micro) out.push_back(*data::MakeBatch(rows, {64, depth, 0}));
  return out;
}

double MaxDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// The largest gradient entry of the whole model.
double LargestGradient(model::BertForPreTraining model) {
  double largest = 0;
  for (const auto& p : model->parameters()) {
    largest = std::max(largest, p.grad().abs().max().item<double>());
  }
  return largest;
}

TEST(StepTest, AccumulatedMicroBatchesEqualOneBatchOfAll) {
  auto instances = model::testing::RandomInstances(24, 6, 30, 97, 3);
  Rows all;
  for (const auto& in : instances) all.push_back({&in});
  std::vector<Rows> four(4);
  for (size_t i = 0; i < all.size(); ++i) four[i / 6].push_back(all[i]);
  for (model::MlmLossMode mode : {model::MlmLossMode::kPerToken, model::MlmLossMode::kPerSequence}) {
    Alone one = Make(torch::kDouble, model::Precision::kFp32, false, mode);
    Alone accumulated = Make(torch::kDouble, model::Precision::kFp32, false, mode);
    StepOptions options;
    options.max_grad_norm = 1.0;
    for (int step = 0; step < 3; ++step) {
      auto a = TrainStep(*one.trainee, *one.communicator, Batches({all}, 1), kLr, options);
      auto b = TrainStep(*accumulated.trainee, *accumulated.communicator, Batches(four, 1), kLr,
                         options);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_TRUE(a->applied && b->applied);
      EXPECT_NEAR(a->metrics.loss, b->metrics.loss, kGradientTolerance * a->metrics.loss)
          << "step " << step;
      EXPECT_NEAR(a->grad_norm, b->grad_norm, kGradientTolerance * a->grad_norm) << "step " << step;
      EXPECT_EQ(Pretraining(a->metrics).mlm_tokens, Pretraining(b->metrics).mlm_tokens);
      const double dg = kGradientTolerance * LargestGradient(one.model());
      pbert::testing::ExpectSameGradientsAndWeights(one.model(), accumulated.model(), dg, kLr,
                                                    step, "");
    }
  }
}

// bf16 with master weights (model.master_weights): the model computes with
// bf16 weights, LAMB updates fp32 masters. Against the same step in double
// precision from the same initial weights, and against today's autocast
// over fp32 weights. Bounds from bf16's unit roundoff u = 2^-9: every
// product's inputs are rounded to bf16 (relative u each) and summed in
// fp32, so a product carries about 2u of its operands' scale; along the
// tiny BERT's deepest chain, two layers forward and back with the heads,
// about kRounded = 64 such roundings add up, to kRounded * u of the largest
// entry of what they produce (gradients) and of the loss. Then the weights:
// each bf16 weight is its fp32 master rounded to nearest (exactly).
TEST(StepTest, Bf16MasterWeightsStepWithinBf16RoundingOfDoublePrecision) {
  if (!model::CpuRunsBf16().ok()) {
    GTEST_SKIP() << "this CPU does not compute bf16 (" << model::CpuRunsBf16().message() << ")";
  }
  constexpr double kU = 1.0 / 512, kRounded = 64;
  auto instances = model::testing::RandomInstances(24, 6, 30, 97, 5);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  const auto batches = Batches({rows}, 1);
  Alone reference = Make();
  Alone masters = Make(torch::kFloat, model::Precision::kBf16, true);
  Alone autocast = Make(torch::kFloat, model::Precision::kBf16, false);
  ASSERT_TRUE(masters.trainee->has_master_weights());
  ASSERT_FALSE(autocast.trainee->has_master_weights());
  for (const auto& p : masters.model()->parameters()) ASSERT_EQ(p.scalar_type(), torch::kBFloat16);
  for (const auto& p : masters.trainee->weights().parameters()) {
    ASSERT_EQ(p.scalar_type(), torch::kFloat);
  }
  StepOptions options;
  options.max_grad_norm = 0;  // the gradients as backward left them
  for (int step = 0; step < 3; ++step) {
    auto r = TrainStep(*reference.trainee, *reference.communicator, batches, kLr, options);
    auto m = TrainStep(*masters.trainee, *masters.communicator, batches, kLr, options);
    auto a = TrainStep(*autocast.trainee, *autocast.communicator, batches, kLr, options);
    ASSERT_TRUE(r.ok() && m.ok() && a.ok());
    ASSERT_TRUE(m->applied);
    EXPECT_NEAR(m->metrics.loss, r->metrics.loss, kRounded * kU * r->metrics.loss)
        << "step " << step;
    EXPECT_NEAR(m->grad_norm, r->grad_norm, kRounded * kU * r->grad_norm) << "step " << step;
    if (step == 0) {  // the same weights: the gradients compare
      const double largest = LargestGradient(reference.model());
      auto pr = reference.model()->named_parameters(), pm = masters.model()->named_parameters(),
           pa = autocast.model()->named_parameters();
      double worst = 0, autocast_worst = 0;
      for (size_t k = 0; k < pr.size(); ++k) {
        const at::Tensor g = pr[k].value().grad();
        const double d = MaxDifference(pm[k].value().grad().to(torch::kDouble), g);
        EXPECT_LE(d, kRounded * kU * largest) << "gradient of " << pr[k].key();
        worst = std::max(worst, d);
        autocast_worst =
            std::max(autocast_worst, MaxDifference(pa[k].value().grad().to(torch::kDouble), g));
      }
      std::printf("largest gradient entry %.3g; from double: master weights %.3g, autocast %.3g\n",
                  largest, worst, autocast_worst);
    }
    auto weights = masters.trainee->weights().named_parameters();
    for (const auto& item : masters.model()->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), weights[item.key()].to(torch::kBFloat16)))
          << item.key() << " is not its master rounded to bf16 after step " << step;
    }
  }
  // The masters moved as the double-precision weights did: LAMB moves each
  // weight by about lr per step, so the gradients' bf16 rounding can
  // change a step's sign only where a gradient entry is within rounding of
  // 0; the weights' largest difference stays within 2 lr per step.
  auto wr = reference.model()->named_parameters(), wm = masters.trainee->weights().named_parameters();
  for (size_t k = 0; k < wr.size(); ++k) {
    EXPECT_LE(MaxDifference(wm[k].value().to(torch::kDouble), wr[k].value()), 3 * 2 * kLr * 1.01)
        << wr[k].key();
  }
}

// Resume with bf16 master weights: the checkpoint keeps the fp32 masters
// (weights()) and LAMB's state; a new trainee loads them and makes its
// bf16 copies from them, and continues bit for bit as the uninterrupted
// one does (the CPU computes the same kernels on the same inputs), dropout
// on.
// The options of the resume tests: a tiny BERT with dropout, trained in
// `precision` on the CPU.
TraineeOptions ResumeOptions(model::Precision precision, bool master_weights) {
  TraineeOptions o;
  o.bert = model::testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.1);
  o.lamb = optim::LambOptions(kLr);
  o.seed = 8;
  o.precision = precision;
  o.master_weights = master_weights;
  return o;
}

// Trains `o` for `end` steps, and again from a checkpoint of step `stop`
// (testing::RunAndResume): the resumed steps' losses and the last weights
// must be the uninterrupted run's, bit for bit. Returns the two runs.
testing::ResumedRun ExpectResumeContinuesBitForBit(const TraineeOptions& o, int stop, int end,
                                                  const std::string& name) {
  auto communicator = distributed::Communicator::Single();
  const auto batches = testing::FourRowSteps(10);
  testing::ResumedRun run =
      testing::RunAndResume(o, *communicator, batches, stop, end, 4, 8, kLr, name);
  EXPECT_EQ(run.error, "");
  if (!run.error.empty()) return run;
  for (int step = stop; step < end; ++step) {
    auto b = TrainStep(*run.resumed, *communicator, batches(step), kLr, {});
    EXPECT_TRUE(b.ok() && b->applied) << "step " << step;
    if (!b.ok()) return run;
    EXPECT_EQ(run.losses[step - stop], b->metrics.loss) << "step " << step << " of " << name;
  }
  auto pa = run.whole->weights().named_parameters();
  auto pb = run.resumed->weights().named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_TRUE(torch::equal(pa[k].value(), pb[k].value())) << pa[k].key() << " of " << name;
  }
  return run;
}

TEST(StepTest, AResumedRunWithMasterWeightsContinuesBitForBit) {
  if (!model::CpuRunsBf16().ok()) {
    GTEST_SKIP() << "this CPU does not compute bf16 (" << model::CpuRunsBf16().message() << ")";
  }
  testing::ResumedRun run = ExpectResumeContinuesBitForBit(
      ResumeOptions(model::Precision::kBf16, true), 2, 5, "pbert_StepTest_resume_masters");
  ASSERT_EQ(run.error, "");
  for (const auto& p : run.resumed->weights().parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat) << "the checkpoint keeps fp32 masters";
  }
}

// Resume in fp8 (emulated): the checkpoint's trainer state keeps the
// scales and their histories (part "fp8"), and the resumed run continues
// bit for bit, its scales those of the uninterrupted run; with and without
// master weights.
TEST(StepTest, AResumedFp8RunContinuesBitForBit) {
  if (!model::Fp8Built()) {
    GTEST_SKIP() << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                 << " has no float8 dtypes (2.1 and later): fp8 is refused in this build";
  }
  if (!model::CpuRunsBf16().ok()) {
    GTEST_SKIP() << "this CPU does not compute bf16 (" << model::CpuRunsBf16().message() << ")";
  }
  for (bool masters : {false, true}) {
    TraineeOptions o = ResumeOptions(model::Precision::kFp8, masters);
    o.fp8.emulation = true;
    o.fp8.amax_history = 3;
    testing::ResumedRun run =
        ExpectResumeContinuesBitForBit(o, 3, 6, "pbert_StepTest_resume_fp8");
    ASSERT_EQ(run.error, "");
    ASSERT_NE(run.resumed->fp8(), nullptr);
    EXPECT_TRUE(torch::equal(run.whole->fp8()->scale(), run.resumed->fp8()->scale()));
    EXPECT_TRUE(torch::equal(run.whole->fp8()->history(), run.resumed->fp8()->history()));
    EXPECT_FALSE(torch::equal(run.whole->fp8()->scale(), torch::ones_like(run.whole->fp8()->scale())))
        << "the scales never moved";
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
    Alone a = Make(torch::kDouble, model::Precision::kFp32, false, mode);
    Alone b = Make(torch::kDouble, model::Precision::kFp32, false, mode);
    StepOptions options;
    auto ra = TrainStep(*a.trainee, *a.communicator, Batches(unpacked, 1), kLr, options);
    auto rb = TrainStep(*b.trainee, *b.communicator, Batches(packed, 2), kLr, options);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->metrics.sequences, 32);
    EXPECT_EQ(rb->metrics.sequences, 32);
    EXPECT_EQ(rb->metrics.rows * 2, ra->metrics.rows);
    EXPECT_NEAR(ra->metrics.loss, rb->metrics.loss, kGradientTolerance * ra->metrics.loss);
    const double dg = kGradientTolerance * LargestGradient(a.model());
    auto pa = a.model()->named_parameters(), pb = b.model()->named_parameters();
    for (size_t k = 0; k < pa.size(); ++k) {
      EXPECT_LE(MaxDifference(pb[k].value().grad(), pa[k].value().grad()), dg)
          << "gradient of " << pa[k].key();
    }
  }
}

// Static shapes (model.static_shapes) pad each micro-batch to one shape:
// the varlen layout's tokens to B*S, the masked-LM slots to B*M (label
// kNoLabel), FlashAttention's boundaries to B*D + B + 1 with the longest S.
// The padding carries no loss and attends to nothing real, and the dropout
// masks are the same for the real tokens (drawn by element index, the
// padding after them), so three steps with dropout on give the same losses,
// metrics, gradients and weights in every attention layout, to the
// rounding of sums over more (zero) terms (the bound above).
TEST(StepTest, StaticShapesChangeNoLossMetricOrGradient) {
  auto instances = model::testing::RandomInstances(36, 4, 28, 97, 6);
  const Rows rows = model::testing::PackInOrder(instances, 3, 64);
  for (model::AttentionKind kind :
       {model::AttentionKind::kDense, model::AttentionKind::kBlocked, model::AttentionKind::kVarlen}) {
    auto make = [&](bool static_shapes) {
      return MakeAlone(WithDropout(model::testing::TinyOptions().attention(kind).static_shapes(
                                       static_shapes),
                                   21));
    };
    Alone plain = make(false), fixed = make(true);
    for (int step = 0; step < 3; ++step) {
      const Rows part(rows.begin() + 2 * step, rows.begin() + 2 * step + 2);
      const auto batches = Batches({part}, 3);
      // The padded inputs do have one shape: B*S tokens, B*M slots.
      if (kind == model::AttentionKind::kVarlen) {
        model::Inputs in = MakeInputs(batches[0], fixed.trainee->input_plan());
        tasks::AddPretrainingInputs(batches[0], fixed.trainee->input_plan(), &in);
        const int64_t B = batches[0].rows(), S = batches[0].input_ids.size(1);
        EXPECT_EQ(in.input_ids.numel(), B * S);
        EXPECT_EQ(tasks::PretrainingTargetsOf(in).mlm_labels.numel(),
                  batches[0].mlm_positions.numel());
        EXPECT_EQ(in.mlm_token.numel(), batches[0].mlm_positions.numel());
        EXPECT_LT(batches[0].tokens, B * S) << "the test's rows should leave padding";
      }
      torch::manual_seed(100 + step);  // the same dropout seeds for both
      auto a = TrainStep(*plain.trainee, *plain.communicator, batches, kLr, {});
      torch::manual_seed(100 + step);
      auto b = TrainStep(*fixed.trainee, *fixed.communicator, batches, kLr, {});
      ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status());
      const std::string where = absl::StrCat(static_cast<int>(kind), " step ", step);
      const double tol = kGradientTolerance;
      EXPECT_NEAR(a->metrics.loss, b->metrics.loss, tol * a->metrics.loss) << where;
      const tasks::PretrainingMetrics pa = Pretraining(a->metrics), pb = Pretraining(b->metrics);
      EXPECT_NEAR(pa.mlm_loss, pb.mlm_loss, tol * pa.mlm_loss) << where;
      EXPECT_NEAR(pa.mlm_sequence_loss, pb.mlm_sequence_loss, tol * pa.mlm_sequence_loss) << where;
      EXPECT_NEAR(pa.nsp_loss, pb.nsp_loss, tol * pa.nsp_loss) << where;
      EXPECT_EQ(pa.mlm_tokens, pb.mlm_tokens) << where;
      EXPECT_EQ(pa.mlm_sequences, pb.mlm_sequences) << where;
      EXPECT_EQ(pa.mlm_correct, pb.mlm_correct) << where;
      EXPECT_EQ(pa.nsp_sequences, pb.nsp_sequences) << where;
      EXPECT_EQ(pa.nsp_correct, pb.nsp_correct) << where;
      EXPECT_NEAR(a->grad_norm, b->grad_norm, tol * a->grad_norm) << where;
      pbert::testing::ExpectSameGradientsAndWeights(
          plain.model(), fixed.model(), tol * LargestGradient(plain.model()), kLr, step,
          absl::StrCat(", layout ", static_cast<int>(kind)));
    }
  }
}

// FlashAttention's boundaries with static shapes (what a GPU run gets; the
// kernel itself runs only there): the real sequences' boundaries, the
// padding in sequences of at most S, then empty sequences, B*D + B + 1 in
// all, S the longest.
TEST(StepTest, StaticShapesPadFlashAttentionsBoundaries) {
  auto instances = model::testing::RandomInstances(9, 4, 28, 97, 7);
  const Rows rows = model::testing::PackInOrder(instances, 3, 64);
  const auto batch = *data::MakeBatch(rows, {64, 3, 0});
  const int64_t B = batch.rows(), S = 64, D = 3;
  model::InputPlan plan;
  plan.flash = true;
  plan.static_shapes = true;
  model::Inputs in = MakeInputs(batch, plan);
  tasks::AddPretrainingInputs(batch, plan, &in);
  const auto& boundaries = std::get<model::VarlenBoundaries>(in.attention);
  EXPECT_EQ(boundaries.max_seqlen, S);
  const at::Tensor cu = boundaries.cu_seqlens.to(at::kLong);
  ASSERT_EQ(cu.numel(), B * D + B + 1);
  const at::Tensor real = batch.cu_seqlens.to(at::kLong);
  EXPECT_TRUE(torch::equal(cu.narrow(0, 0, real.numel()), real));
  const at::Tensor steps = cu.narrow(0, 1, cu.numel() - 1) - cu.narrow(0, 0, cu.numel() - 1);
  EXPECT_GE(steps.min().item<int64_t>(), 0);
  EXPECT_LE(steps.max().item<int64_t>(), S);
  EXPECT_EQ(cu[-1].item<int64_t>(), B * S);
  EXPECT_EQ(in.input_ids.numel(), B * S);
  EXPECT_EQ(in.input_ids.narrow(0, batch.tokens, B * S - batch.tokens).abs().sum().item<int64_t>(), 0);
  EXPECT_EQ(tasks::PretrainingTargetsOf(in).mlm_labels.eq(model::kNoLabel).sum().item<int64_t>(),
            batch.mlm_positions.numel() - batch.mlm_used.numel());
}

// model.varlen_kernel cudnn attends through cuDNN only the batches whose
// longest sequence is longer than 128 (the line PyTorch's varlen_attn
// draws), the others through FlashAttention; with static shapes the longest
// is S, so a run keeps one kernel (and one graph per shape).
TEST(StepTest, CudnnAttendsTheBatchesWithASequenceLongerThan128) {
  auto kernel = [](std::vector<int> lengths, int S, bool cudnn, bool static_shapes) {
    std::vector<data::Instance> instances;
    for (size_t k = 0; k < lengths.size(); ++k) {
      instances.push_back(model::testing::RandomInstances(1, lengths[k], lengths[k], 97,
                                                          static_cast<uint32_t>(k + 1))[0]);
    }
    const Rows rows = model::testing::PackInOrder(instances, 2, S);
    const auto batch = *data::MakeBatch(rows, {S, 2, 0});
    model::InputPlan plan;
    plan.flash = true;
    plan.cudnn = cudnn;
    plan.static_shapes = static_shapes;
    const auto& boundaries = std::get<model::VarlenBoundaries>(MakeInputs(batch, plan).attention);
    return boundaries.cudnn ? "cudnn" : "flash";
  };
  EXPECT_STREQ(kernel({100, 128, 40}, 256, true, false), "flash");
  EXPECT_STREQ(kernel({100, 129, 40}, 256, true, false), "cudnn");
  EXPECT_STREQ(kernel({250, 200}, 256, false, false), "flash");
  EXPECT_STREQ(kernel({20, 30}, 128, true, true), "flash");  // S = 128
  EXPECT_STREQ(kernel({20, 30}, 256, true, true), "cudnn");  // S = 256
  EXPECT_STREQ(kernel({20, 30}, 256, false, true), "flash");
}

// The captured step (run.cuda_graphs) records one graph per ShapeKey and
// replays it for every micro-batch with that key: with static shapes,
// micro-batches of different depths and contents must share one key in the
// layouts it takes (dense, and FlashAttention's boundaries), and without
// them FlashAttention's boundaries must not.
TEST(StepTest, StaticShapesGiveEveryMicroBatchOneGraph) {
  auto instances = model::testing::RandomInstances(40, 4, 60, 97, 8);
  std::vector<data::PackedBatch> batches;
  for (int depth : {1, 2, 3}) {
    const Rows rows = model::testing::PackInOrder(instances, depth, 64);
    batches.push_back(*data::MakeBatch(Rows(rows.begin(), rows.begin() + 4), {64, 3, 0}));
  }
  for (bool flash : {false, true}) {
    model::InputPlan plan;
    plan.attention = flash ? model::AttentionKind::kVarlen : model::AttentionKind::kDense;
    plan.flash = flash;
    // As a run prepares them: the task's tensors with the model's.
    auto prepared = [&](const data::PackedBatch& batch) {
      model::Inputs in = MakeInputs(batch, plan);
      tasks::AddPretrainingInputs(batch, plan, &in);
      return in;
    };
    std::set<std::string> fixed, free;
    for (const data::PackedBatch& batch : batches) {
      plan.static_shapes = true;
      fixed.insert(ShapeKey(prepared(batch)));
      plan.static_shapes = false;
      free.insert(ShapeKey(prepared(batch)));
    }
    EXPECT_EQ(fixed.size(), 1u) << (flash ? "varlen" : "dense") << ": " << *fixed.begin();
    if (flash) EXPECT_GT(free.size(), 1u) << "the boundaries' count follows the sequences";
  }
}

// The captured step's bookkeeping (train/captured_step.h) on the CPU,
// through a stand-in for CUDA graphs that runs the recorded work at each
// replay (tests/train/host_graph.h): the graph's own input buffers refilled
// for each micro-batch, the generators reseeded and the dropout seeds
// drawn into their slots before each replay, the gradients accumulated by
// replays, the metric sums added up. In double precision with dropout on
// (embeddings, attention and the fused layers' CPU reference, each seed
// taken from its slot in the replays), dense attention with static shapes,
// two micro-batches a step, the first two eager and the rest replays of one
// graph: the same arithmetic in the same order as eager steps, so the same
// losses, metrics, gradients and weights, bit for bit. Again in fp32 with
// the fused layers through the kernels' CPU twins (model::UseFusedLayerTwins),
// which read their dropout seeds from the slots as the CUDA kernels do in a
// graph.
class CapturedStepTest : public ::testing::TestWithParam<bool> {};

TEST_P(CapturedStepTest, TheCapturedStepsBookkeepingEqualsEagerStepsBitForBit) {
  const bool twins = GetParam();
  model::UseFusedLayerTwins(twins);
  struct TwinsOff {
    ~TwinsOff() { model::UseFusedLayerTwins(false); }
  } twins_off;
  auto instances = model::testing::RandomInstances(160, 4, 28, 97, 9);
  const Rows rows = model::testing::PackInOrder(instances, 3, 64);
  ASSERT_GE(rows.size(), 40u);
  auto recorded = std::make_shared<int>(0);
  auto watch = std::make_shared<pbert::testing::GraphWatch>();
  auto make = [&](bool graphs) {
    TraineeOptions o = WithDropout(model::testing::TinyOptions()
                                       .attention(model::AttentionKind::kDense)
                                       .fused_layers(true)
                                       .static_shapes(true),
                                   23);
    if (twins) o.dtype = torch::kFloat;
    o.cuda_graphs = graphs;
    o.graph_recorder = pbert::testing::HostGraphs(recorded, watch);
    return MakeAlone(o);
  };
  auto batches = [&](int step) {
    std::vector<data::PackedBatch> out;
    for (int k = 0; k < 2; ++k) {
      const auto first = rows.begin() + 8 * step + 4 * k;
      out.push_back(*data::MakeBatch(Rows(first, first + 4), {64, 3, 0}));
    }
    return out;
  };
  constexpr int kSteps = 5;
  // One after the other: each trainee seeds the process's generators anew.
  std::vector<StepResult> eager_results, captured_results;
  Alone eager = make(false);
  for (int step = 0; step < kSteps; ++step) {
    auto r = TrainStep(*eager.trainee, *eager.communicator, batches(step), kLr, {});
    ASSERT_TRUE(r.ok()) << r.status();
    eager_results.push_back(*r);
  }
  Alone captured = make(true);
  for (int step = 0; step < kSteps; ++step) {
    auto r = TrainStep(*captured.trainee, *captured.communicator, batches(step), kLr, {});
    ASSERT_TRUE(r.ok()) << r.status();
    captured_results.push_back(*r);
  }
  EXPECT_EQ(*recorded, 1) << "one shape: one graph";
  // Nothing a graph cannot hold: no host read, every buffer read from
  // outside where the capture found it.
  EXPECT_TRUE(watch->problems.empty()) << watch->problems.front();
  EXPECT_GT(watch->outside_reads, 20u) << "the weights, gradients and inputs";
  EXPECT_EQ(captured.trainee->graphs()->graphs(), 1);
  for (int step = 0; step < kSteps; ++step) {
    const StepResult &a = eager_results[step], &b = captured_results[step];
    EXPECT_EQ(a.metrics.loss, b.metrics.loss) << "step " << step;
    EXPECT_EQ(Pretraining(a.metrics).mlm_correct, Pretraining(b.metrics).mlm_correct)
        << "step " << step;
    EXPECT_EQ(Pretraining(a.metrics).nsp_correct, Pretraining(b.metrics).nsp_correct)
        << "step " << step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
  }
  auto pa = eager.model()->named_parameters(), pb = captured.model()->named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_TRUE(torch::equal(pa[k].value(), pb[k].value())) << pa[k].key();
    EXPECT_TRUE(torch::equal(pa[k].value().grad(), pb[k].value().grad())) << pa[k].key();
  }
}

INSTANTIATE_TEST_SUITE_P(StepTest, CapturedStepTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Fp32ThroughTheKernelTwins"
                                                         : "DoubleThroughTheReference");
                         });

// The stand-in's watch (tests/train/host_graph.h) sees what a CUDA graph
// cannot hold: a value read on the host, and a buffer read from outside
// the work that moved between replays; work that does neither passes.
TEST(StepTest, TheGraphStandInSeesHostReadsAndMovedBuffers) {
  auto recorded = std::make_shared<int>(0);
  auto watch = std::make_shared<pbert::testing::GraphWatch>();
  auto record = pbert::testing::HostGraphs(recorded, watch);
  std::vector<std::string>* problems = &watch->problems;
  const c10::Device cpu(c10::kCPU);
  at::Tensor weight = torch::ones({4}), out = torch::zeros({4});
  auto clean = record(cpu, [&] { out.copy_(weight * 2 + 1); });
  ASSERT_TRUE(clean.ok());
  for (int k = 0; k < 3; ++k) ASSERT_TRUE((*clean)->Replay().ok());
  EXPECT_TRUE(problems->empty()) << problems->front();
  EXPECT_EQ(out[0].item<float>(), 3.f);

  auto reads = record(cpu, [&] {
    if (weight.sum().item<float>() > 0) out.add_(1);
  });
  ASSERT_TRUE((*reads)->Replay().ok());
  ASSERT_FALSE(problems->empty());  // item and the read it makes, _local_scalar_dense
  EXPECT_NE(problems->front().find("reads tensor values on the host"), std::string::npos)
      << problems->front();
  problems->clear();
  auto masked = record(cpu, [&] { out.copy_(weight.masked_select(weight > 0).sum()); });
  ASSERT_TRUE((*masked)->Replay().ok());
  EXPECT_FALSE(problems->empty()) << "masked_select's shape is read on the host";
  problems->clear();

  auto moved = record(cpu, [&] { out.copy_(weight * 2); });
  for (int k = 0; k < 3; ++k) ASSERT_TRUE((*moved)->Replay().ok());
  EXPECT_TRUE(problems->empty()) << problems->front();
  weight = torch::full({4}, 2.f);  // a new buffer: a graph would read the old one
  ASSERT_TRUE((*moved)->Replay().ok());
  ASSERT_EQ(problems->size(), 1u);
  EXPECT_NE(problems->front().find("at another address than in replay 2"), std::string::npos)
      << problems->front();
  EXPECT_EQ(*recorded, 4);
}

// Where the captured step cannot run, one line names run.cuda_graphs and
// what to change; the trainee is not made.
TEST(StepTest, TheCapturedStepIsRefusedWhereItCannotRunNamingTheKey) {
  const model::BertOptions fixed = model::testing::TinyOptions().static_shapes(true);
  model::InputPlan gpu;
  gpu.device = c10::Device(c10::kCUDA, 0);
  gpu.attention = model::AttentionKind::kDense;
  EXPECT_TRUE(CheckCapturable(fixed, gpu, model::Precision::kFp32).ok());
  model::InputPlan flash = gpu;
  flash.attention = model::AttentionKind::kVarlen;
  flash.flash = true;
  EXPECT_TRUE(CheckCapturable(fixed, flash, model::Precision::kBf16).ok());
  model::InputPlan buckets = flash;
  buckets.flash = false;
  model::InputPlan blocked = gpu;
  blocked.attention = model::AttentionKind::kBlocked;
  model::InputPlan cpu = gpu;
  cpu.device = c10::kCPU;
  const struct {
    model::BertOptions bert;
    model::InputPlan plan;
    model::Precision precision;
    const char* names;
  } refused[] = {
      {fixed, cpu, model::Precision::kFp32, "run.device"},
      {model::testing::TinyOptions(), gpu, model::Precision::kFp32, "model.static_shapes"},
      {fixed, buckets, model::Precision::kFp32, "model.attention"},
      {fixed, blocked, model::Precision::kFp32, "model.attention"},
      {fixed, flash, model::Precision::kFp16, "model.precision"},
  };
  for (const auto& r : refused) {
    const absl::Status status = CheckCapturable(r.bert, r.plan, r.precision);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << r.names;
    EXPECT_EQ(status.message().rfind("run.cuda_graphs: true ", 0), 0u) << status.message();
    EXPECT_NE(status.message().find(r.names), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  }
  auto communicator = distributed::Communicator::Single();
  TraineeOptions o;
  o.bert = fixed;
  o.cuda_graphs = true;
  auto trainee = Trainee::Make(o, *communicator);
  ASSERT_FALSE(trainee.ok());
  EXPECT_NE(trainee.status().message().find("run.cuda_graphs"), std::string::npos);
}

TEST(StepTest, ANonFiniteLossSkipsTheUpdate) {
  Alone run = Make();
  auto instances = model::testing::RandomInstances(4, 6, 20, 97, 5);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  {
    torch::NoGradGuard no_grad;
    run.model()->cls->predictions->bias[7] = std::numeric_limits<double>::quiet_NaN();
  }
  auto before = run.model()->bert->embeddings->word_embeddings->weight.clone();
  auto result =
      TrainStep(*run.trainee, *run.communicator, Batches({rows}, 1), kLr, StepOptions());
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->applied);
  EXPECT_TRUE(torch::equal(before, run.model()->bert->embeddings->word_embeddings->weight));
}

// The step's gradient norm (clipping and the logged grad_norm) on a tiny
// BERT of the demo's shape, whose word-embedding gradient has 3.9M entries,
// mostly zero or small: equal to a long double sum of the gradients'
// squares to 1e-7 (the double accumulation is good to about 1e-12 here).
TEST(StepTest, TheGradientNormIsExactOnATinyBert) {
  auto communicator = distributed::Communicator::Single();
  TraineeOptions trainee;
  trainee.bert = model::BertOptions()
                     .vocab_size(30522)
                     .hidden_size(128)
                     .num_layers(2)
                     .num_heads(2)
                     .intermediate_size(512)
                     .max_position_embeddings(128);
  trainee.lamb = optim::LambOptions(kLr);
  trainee.seed = 8;
  auto made = Trainee::Make(trainee, *communicator);
  ASSERT_TRUE(made.ok()) << made.status();
  model::BertForPreTraining bert = pbert::testing::PretrainingModel((*made)->model());
  auto instances = model::testing::RandomInstances(16, 20, 120, 30522, 6);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  StepOptions options;
  options.max_grad_norm = 0;  // report the norm, leave the gradients as they are
  auto result =
      TrainStep(**made, *communicator, {*data::MakeBatch(rows, {128, 1, 0})}, kLr, options);
  ASSERT_TRUE(result.ok()) << result.status();
  long double squares = 0;
  for (const auto& p : bert->parameters()) {
    at::Tensor g = p.grad().to(torch::kDouble).contiguous();
    const double* x = g.data_ptr<double>();
    for (int64_t i = 0; i < g.numel(); ++i) squares += static_cast<long double>(x[i]) * x[i];
  }
  const double reference = static_cast<double>(std::sqrt(squares));
  EXPECT_NEAR(result->grad_norm, reference, 1e-7 * reference);
}

}  // namespace
}  // namespace pbert::train

namespace pbert::train {
namespace {

// A step's model FLOPs against a count made from the model's own weight
// matrices: each product of a [out, in] weight with n vectors is 2·n·in·out
// FLOPs forward, where n is what the weight is applied to (every real token
// in the encoder, every sequence in the pooler and the NSP classifier,
// every masked token in the MLM transform and the tied decoder, over the
// vocabulary's rows); attention
// adds two products of 2·length²·hidden per sequence and layer; backward
// doubles the forward.
TEST(StepTest, FlopsAreCountedFromTheModelsOwnMatrices) {
  auto instances = model::testing::RandomInstances(12, 6, 30, 97, 5);
  Rows packed(6);  // two sequences of at most 30 tokens a row
  for (size_t i = 0; i < instances.size(); ++i) packed[i % 6].push_back(&instances[i]);
  Alone run = Make();
  const std::vector<data::PackedBatch> batches = Batches({packed, packed}, 4);
  double tokens = 0, sequences = 0, masked = 0, squared = 0;
  for (const auto& in : instances) {
    const double length = static_cast<double>(in.input_ids.size());
    tokens += length;
    squared += length * length;
    sequences += 1;
    masked += static_cast<double>(in.masked_positions.size());
  }
  tokens *= 2, squared *= 2, sequences *= 2, masked *= 2;  // two micro-batches of the same rows
  double forward = 0;
  int layers = 0;
  // The matrices as files hold them: the vocabulary's rows, not the padding
  // (model.vocab_padding) the products also run over.
  for (const auto& [name, value] : model::FileTensors(*run.model())) {
    if (value.dim() != 2) continue;
    const double matrix = static_cast<double>(value.size(0) * value.size(1));
    if (name.find("encoder.layer.") != std::string::npos) {
      forward += 2 * tokens * matrix;
      if (name.find("attention.self.query.weight") != std::string::npos) ++layers;
    } else if (name.find("pooler") != std::string::npos ||
               name.find("seq_relationship") != std::string::npos) {
      forward += 2 * sequences * matrix;
    } else if (name.find("predictions.transform") != std::string::npos ||
               name.find("word_embeddings") != std::string::npos) {
      forward += 2 * masked * matrix;
    }
  }
  ASSERT_EQ(layers, 2);
  forward += layers * 2 * 2 * squared * 32;  // hidden 32
  auto result = TrainStep(*run.trainee, *run.communicator, batches, kLr, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->metrics.flops, 3 * forward);
  EXPECT_GT(result->metrics.flops, 0);
}

}  // namespace
}  // namespace pbert::train

namespace pbert::train {
namespace {

// Which operators RecordedOps counts: those called at the top level of
// their thread (not inside another operator), or those that autograd's
// gradient accumulators (AccumulateGrad) call.
enum class Counted { kTopLevel, kInAccumulators };

// The operators of kind `kCounted` run while it lives, by name, on any
// thread, through LibTorch's RecordFunction callbacks.
template <Counted kCounted>
class RecordedOps {
 public:
  RecordedOps() {
    counts_ = &counts;
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&Start, &End).scopes({at::RecordScope::FUNCTION}));
  }
  ~RecordedOps() {
    at::removeCallback(handle_);
    counts_ = nullptr;
  }
  std::map<std::string, int> counts;

 private:
  static bool IsAccumulator(const at::RecordFunction& fn) {
    return std::string(fn.name()).find("AccumulateGrad") != std::string::npos;
  }
  static std::unique_ptr<at::ObserverContext> Start(const at::RecordFunction& fn) {
    const bool counted = kCounted == Counted::kTopLevel ? depth_ == 0 : inside_ > 0;
    if (counted && counts_ != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      ++(*counts_)[fn.name()];
    }
    ++depth_;
    if (IsAccumulator(fn)) ++inside_;
    return nullptr;
  }
  static void End(const at::RecordFunction& fn, at::ObserverContext*) {
    --depth_;
    if (IsAccumulator(fn)) --inside_;
  }

  static inline thread_local int depth_ = 0;
  static inline thread_local int inside_ = 0;
  static inline std::map<std::string, int>* counts_ = nullptr;
  static inline std::mutex mu_;
  at::CallbackHandle handle_ = 0;
};
using TopLevelOps = RecordedOps<Counted::kTopLevel>;
using AccumulatorOps = RecordedOps<Counted::kInAccumulators>;

// A step's work on the parameters is a fixed number of multi-tensor calls,
// whatever the number of parameters: no zero_, no clipping mul_ and no
// trust-ratio mul_ per parameter (each a kernel launch on a GPU, about a
// thousand a BERT-large step), and no read of a value to the host but the
// one counted (aten::item, aten::_local_scalar_dense). The operators of a
// step of a model with twice the layers (twice the parameters, 2 -> 4
// layers) differ only in those of the forward and backward passes.
// Mutations tried: zeroing, clipping or the trust ratio per parameter (the
// counts of zero_, mul_ or select then grow with the layers).
TEST(StepTest, TheOptimizerPartOfAStepIsMultiTensorAndReadsNothing) {
  auto instances = model::testing::RandomInstances(12, 6, 21, 97, 9);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  std::map<std::string, int> counts[2];
  for (int k = 0; k < 2; ++k) {
    auto communicator = distributed::Communicator::Single();
    TraineeOptions options;
    options.bert = model::testing::TinyOptions();
    options.bert.num_layers(options.bert.num_layers() * (k + 1));
    options.lamb = optim::LambOptions(kLr);
    options.seed = 3;
    auto trainee = Trainee::Make(options, *communicator);
    ASSERT_TRUE(trainee.ok()) << trainee.status();
    StepOptions step;
    step.max_grad_norm = 1.0;
    const auto batches = Batches({rows}, 1);
    ASSERT_TRUE(TrainStep(**trainee, *communicator, batches, kLr, step).ok());  // states made
    TopLevelOps ops;
    ASSERT_TRUE(TrainStep(**trainee, *communicator, batches, kLr, step).ok());
    counts[k] = ops.counts;
  }
  for (const char* name : {"aten::zero_", "aten::mul_", "aten::select", "aten::item",
                           "aten::_local_scalar_dense", "aten::_foreach_zero_",
                           "aten::_foreach_mul_"}) {
    EXPECT_EQ(counts[0][name], counts[1][name]) << name << " grows with the parameters";
  }
  EXPECT_EQ(counts[0]["aten::item"] + counts[0]["aten::_local_scalar_dense"], 0);
}

// In one process a step's first micro-batch takes each parameter's gradient
// as autograd made it (GradientReducer::ZeroGrad lets them go): no zeroing
// and no addition per parameter, on a GPU a fill and an add kernel each per
// parameter in every step (about 400 of each for BERT-large); a second
// micro-batch adds to each. Mutation tried: the gradients zeroed in place
// (the first micro-batch then adds to every gradient, and a multi-tensor
// zero runs).
TEST(StepTest, AStepsFirstMicroBatchTakesItsGradientsAsAutogradMadeThem) {
  auto instances = model::testing::RandomInstances(12, 6, 21, 97, 9);
  Rows rows;
  for (const auto& in : instances) rows.push_back({&in});
  auto communicator = distributed::Communicator::Single();
  TraineeOptions options;
  options.bert = model::testing::TinyOptions();
  options.lamb = optim::LambOptions(kLr);
  options.seed = 3;
  auto trainee = Trainee::Make(options, *communicator);
  ASSERT_TRUE(trainee.ok()) << trainee.status();
  StepOptions step;
  step.max_grad_norm = 1.0;
  ASSERT_TRUE(TrainStep(**trainee, *communicator, Batches({rows}, 1), kLr, step).ok());
  int with_gradients = 0;
  for (const at::Tensor& p : (*trainee)->model().parameters()) with_gradients += p.grad().defined();
  ASSERT_GT(with_gradients, 10);
  for (int micro_batches : {1, 2}) {
    AccumulatorOps accumulated;
    TopLevelOps top;
    const std::vector<Rows> micro(static_cast<size_t>(micro_batches), rows);
    ASSERT_TRUE(TrainStep(**trainee, *communicator, Batches(micro, 1), kLr, step).ok());
    EXPECT_EQ(accumulated.counts["aten::add_"], (micro_batches - 1) * with_gradients)
        << micro_batches << " micro-batches";
    EXPECT_EQ(top.counts["aten::_foreach_zero_"] + top.counts["aten::zero_"], 0);
  }
}

// On a GPU every read from the device waits for its queue: a step reads
// once, at its end (the metrics, the gradient norm and the finite checks
// together), whatever its micro-batches, packing, clipping and precision;
// a skipped step too; an evaluation once.
TEST(StepTest, OneHostReadPerStep) {
  auto instances = model::testing::RandomInstances(18, 6, 21, 97, 9);  // 3 fit a row of 64
  Rows unpacked, packed(6);
  for (const auto& in : instances) unpacked.push_back({&in});
  for (size_t i = 0; i < instances.size(); ++i) packed[i % 6].push_back(&instances[i]);
  for (const model::Precision precision : {model::Precision::kFp32, model::Precision::kBf16}) {
    for (const int micro_batches : {1, 3}) {
      for (const bool pack : {false, true}) {
        for (const double clip : {0.0, 1.0}) {
          auto communicator = distributed::Communicator::Single();
          TraineeOptions options;
          options.bert = model::testing::TinyOptions();
          options.lamb = optim::LambOptions(kLr);
          options.precision = precision;
          options.seed = 3;
          auto trainee = Trainee::Make(options, *communicator);
          ASSERT_TRUE(trainee.ok()) << trainee.status();
          const std::vector<Rows> micro(micro_batches, pack ? packed : unpacked);
          StepOptions step;
          step.max_grad_norm = clip;
          for (int n = 0; n < 2; ++n) {
            const uint64_t before = HostReads();
            auto result =
                TrainStep(**trainee, *communicator, Batches(micro, pack ? 3 : 1), kLr, step);
            ASSERT_TRUE(result.ok()) << result.status();
            EXPECT_TRUE(result->applied);
            EXPECT_EQ(HostReads() - before, 1u)
                << NameOf(precision) << ", " << micro_batches << " micro-batches, "
                << (pack ? "packed" : "unpacked") << ", max_grad_norm " << clip;
          }
        }
      }
    }
  }
  // A step skipped for a non-finite loss reads once as well.
  Alone run = Make();
  {
    torch::NoGradGuard no_grad;
    run.model()->cls->predictions->bias[7] = std::numeric_limits<double>::quiet_NaN();
  }
  const uint64_t before = HostReads();
  auto skipped =
      TrainStep(*run.trainee, *run.communicator, Batches({unpacked}, 1), kLr, StepOptions());
  ASSERT_TRUE(skipped.ok());
  EXPECT_FALSE(skipped->applied);
  EXPECT_EQ(HostReads() - before, 1u);
}

// An evaluation sums on the device and reads once, however many batches.
TEST(StepTest, OneHostReadPerEvaluation) {
  auto made = data::MemorySource::Create("eval", model::testing::RandomInstances(40, 6, 30, 97, 10),
                                         {97, 64, 64});
  ASSERT_TRUE(made.ok()) << made.status();
  std::shared_ptr<const data::SequenceSource> source = *made;
  auto packed = data::PackLengths("lpfhp", source->Lengths(), {64, 3, 1});
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto index = std::make_shared<const data::PackIndex>(std::move(packed->index));
  data::LoaderOptions options;
  options.rows_per_batch = 4;
  tasks::PackedSet set;
  set.name = "eval";
  set.sequences = source;
  set.rows = index;
  set.shape = {64, 3, 0};
  const std::unique_ptr<tasks::Task> task = tasks::PretrainingOn({});
  Alone run = Make();
  Evaluator evaluator(*task, set, options, run.model()->options, model::Precision::kFp32,
                      c10::kCPU);
  const uint64_t before = HostReads();
  auto metrics = evaluator.Run(run.trainee->model(), *run.communicator);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(HostReads() - before, 1u);
  EXPECT_EQ(tasks::MetricOf(metrics->counts, "sequences"), 40);
  EXPECT_GT(index->rows(), 4u);  // several batches
}

}  // namespace
}  // namespace pbert::train
