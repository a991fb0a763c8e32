// What only a GPU can show: the varlen layout through FlashAttention, the
// step on CUDA against the CPU's, resume on CUDA, and NCCL. Every test skips
// with one line where this build has no CUDA or no GPU is visible; on a GPU
// machine scripts/gpu runs them.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/torch_compat.h"
#include "gpu/gpu.h"
#include "gtest/gtest.h"
#include "model/attention.h"
#include "model/bert.h"
#include "model/dropout.h"
#include "model/fp8.h"
#include "model/fused_layers.h"
#include "model/losses.h"
#include "model/precision.h"
#include "optim/lamb.h"
#include "tests/kernels/error_bounds.h"
#include "tests/model/fused_kernels_check.h"
#include "tests/model/qkv_buffer.h"
#include "tests/train/fine_tuning_fixtures.h"
#include "tests/train/model_batches.h"
#include "tests/train/pretraining_view.h"
#include "tests/train/resume_run.h"
#include "tests/train/same_step.h"
#include "train/checkpointer.h"
#include "train/host_read.h"
#include "train/inputs.h"
#include "train/step.h"
#include "train/trainee.h"
#include "train/trainer_state.h"

#ifdef PBERT_WITH_NCCL
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pbert::train {
namespace {

using Rows = std::vector<std::vector<const data::Instance*>>;

// Why CUDA tests cannot run here, or "" when they can.
std::string NoGpu() {
  if (!gpu::Built()) return "needs a CUDA build of LibTorch (this one has none)";
  if (torch::cuda::device_count() == 0) return "needs a CUDA GPU (none is visible)";
  return "";
}

#define SKIP_WITHOUT_GPU()                                 \
  do {                                                     \
    if (const std::string why = NoGpu(); !why.empty()) {   \
      GTEST_SKIP() << why;                                 \
    }                                                      \
  } while (0)

const c10::Device kGpu(c10::kCUDA, 0);

// A tiny BERT with 64-wide heads (FlashAttention's kind) in the varlen
// layout, its layers fused (the CUDA kernels), trained in bf16 on the GPU
// at lr 1e-3.
TraineeOptions Bf16OnTheGpu(uint64_t seed) {
  TraineeOptions o;
  o.bert = model::testing::TinyOptions()
               .hidden_size(128)
               .num_heads(2)
               .attention(model::AttentionKind::kVarlen)
               .fused_layers(true);
  o.lamb = optim::LambOptions(1e-3);
  o.seed = seed;
  o.device = kGpu;
  o.precision = model::Precision::kBf16;
  return o;
}

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

// Packed rows at depths 1-8, BERT with 64-wide heads (FlashAttention's
// kind), bf16 autocast on the GPU through each varlen kernel
// (model.varlen_kernel: FlashAttention's, cuDNN's where it runs, LibTorch
// 2.15 or later; in rows of 256 with sequences of up to 250 tokens, as
// cuDNN attends only batches with one longer than 128), against the dense
// layout in fp32 on the same GPU. bf16 keeps 8 significant bits (a
// relative rounding of 2^-9 per operation): the tolerances are bf16's, as
// the CPU's bf16 equivalence test derives them (tests/model/bert_test.cc):
// logits within 8 bf16 ulps of the largest logit (1/32 of it), the loss
// within 1%, each gradient within 5% of its largest entry.
class VarlenKernelTest : public ::testing::TestWithParam<model::VarlenKernel> {};

TEST_P(VarlenKernelTest, VarlenEqualsDenseFp32) {
  SKIP_WITHOUT_GPU();
  const model::VarlenKernel kernel = GetParam();
  const bool cudnn = kernel == model::VarlenKernel::kCudnn;
  const int row = cudnn ? 256 : 64, longest = cudnn ? 250 : 30;
  auto options = model::testing::TinyOptions()
                     .hidden_size(128)  // head width 64
                     .num_heads(2)
                     .max_position_embeddings(row)
                     .varlen_kernel(kernel);
  const absl::Status runs = model::CheckVarlenKernel(options, kGpu);
  if (!runs.ok()) GTEST_SKIP() << runs.message();
  for (int depth : {1, 2, 4, 8}) {
    torch::manual_seed(depth);
    model::BertForPreTraining dense(options.attention(model::AttentionKind::kDense));
    model::BertForPreTraining varlen(options.attention(model::AttentionKind::kVarlen));
    {
      torch::NoGradGuard no_grad;
      auto from = dense->named_parameters();
      for (auto& p : varlen->named_parameters()) p.value().copy_(from[p.key()]);
    }
    dense->to(kGpu);
    varlen->to(kGpu);
    auto instances = model::testing::RandomInstances(24, 6, longest, 97, 500 + depth);
    auto rows = model::testing::PackInOrder(instances, depth, row);
    const data::PackedBatch batch = *data::MakeBatch(rows, {row, depth, 0});
    auto run = [&](model::BertForPreTraining& m, model::Precision precision) {
      m->zero_grad();
      const model::Inputs inputs = model::testing::InputsFor(m, batch, precision);
      if (m->options.attention() == model::AttentionKind::kVarlen &&
          precision == model::Precision::kBf16) {
        const auto* boundaries = std::get_if<model::VarlenBoundaries>(&inputs.attention);
        EXPECT_TRUE(boundaries != nullptr && boundaries->cudnn == cudnn)
            << "the varlen kernel asked for is not in use (longest "
            << (boundaries != nullptr ? boundaries->max_seqlen : 0) << ")";
      }
      model::PretrainingLogits logits;
      at::Tensor loss;
      {
        model::AutocastGuard autocast(precision, c10::DeviceType::CUDA);
        logits = m(inputs);
        loss = model::PretrainingLoss(model::ComputeSums(logits, tasks::PretrainingTargetsOf(inputs)),
                                      model::MlmLossMode::kPerToken,
                                      tasks::PretrainingTotals(batch));
      }
      loss.backward();
      return std::make_pair(logits, loss.item<double>());
    };
    auto gradients = [](model::BertForPreTraining& m) {
      std::vector<at::Tensor> out;
      for (const auto& p : m->parameters()) out.push_back(p.grad().detach().clone());
      return out;
    };
    auto [reference, reference_loss] = run(dense, model::Precision::kFp32);
    const std::vector<at::Tensor> reference_gradients = gradients(dense);
    // The dense layout in bf16 too: how far bf16's rounding alone moves each
    // gradient. The NSP head's gradients are sums over the sequences of
    // terms of both signs, so their rounding is relative to the terms, not
    // to the sum, and can be far above 5% of the sum's largest entry.
    run(dense, model::Precision::kBf16);
    const std::vector<at::Tensor> rounded_gradients = gradients(dense);
    auto [flash, flash_loss] = run(varlen, model::Precision::kBf16);
    const double scale = reference.mlm.abs().max().item<double>();
    EXPECT_LE(MaxAbsDiff(flash.mlm, reference.mlm), scale / 32) << "depth " << depth;
    const at::Tensor valid = batch.nsp_valid.to(kGpu).unsqueeze(-1);
    EXPECT_LE(MaxAbsDiff(flash.nsp * valid, reference.nsp * valid), scale / 32)
        << "depth " << depth;
    EXPECT_NEAR(flash_loss, reference_loss, 0.01 * reference_loss) << "depth " << depth;
    // FlashAttention rounds in other places than the dense bf16 path, by
    // the same unit: within twice that path's own distance from fp32.
    auto b = varlen->named_parameters();
    for (size_t k = 0; k < b.size(); ++k) {
      const at::Tensor& reference_gradient = reference_gradients[k];
      const double g = reference_gradient.abs().max().item<double>();
      const double rounding = MaxAbsDiff(rounded_gradients[k], reference_gradient);
      EXPECT_LE(MaxAbsDiff(b[k].value().grad(), reference_gradient), 0.05 * g + 2 * rounding + 1e-6)
          << "gradient of " << b[k].key() << " at depth " << depth << " (dense bf16: " << rounding
          << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CudaTest, VarlenKernelTest,
                         ::testing::Values(model::VarlenKernel::kFlash, model::VarlenKernel::kCudnn),
                         [](const ::testing::TestParamInfo<model::VarlenKernel>& info) {
                           return std::string(info.param == model::VarlenKernel::kFlash ? "Flash"
                                                                                        : "Cudnn");
                         });

// Three steps in double precision (varlen in buckets: no FlashAttention in
// fp64) on the GPU and on the CPU, from the same weights and batches: the
// same sums in other orders, so the gradients differ by rounding only,
// under kTerms * eps of the largest entry (tests/train/step_test.cc), and
// LAMB turns that into at most lr * dg / eps_lamb per step.
TEST(CudaTest, AStepOnTheGpuEqualsTheCpuStep) {
  SKIP_WITHOUT_GPU();
  constexpr double kTerms = 1 << 16, kLr = 1e-2;
  auto communicator = distributed::Communicator::Single();
  auto make = [&](const c10::Device& device) {
    TraineeOptions o;
    o.bert = model::testing::TinyOptions();
    o.lamb = optim::LambOptions(kLr);
    o.seed = 21;
    o.dtype = torch::kDouble;
    o.device = device;
    return std::move(*Trainee::Make(o, *communicator));
  };
  auto cpu = make(c10::kCPU), gpu = make(kGpu);
  auto instances = model::testing::RandomInstances(48, 6, 30, 97, 8);
  auto rows = model::testing::PackInOrder(instances, 3, 64);
  for (int step = 0; step < 3; ++step) {
    Rows part(rows.begin() + 4 * step, rows.begin() + 4 * step + 4);
    const std::vector<data::PackedBatch> batches = {*data::MakeBatch(part, {64, 3, 0})};
    auto a = TrainStep(*cpu, *communicator, batches, kLr, {});
    auto b = TrainStep(*gpu, *communicator, batches, kLr, {});
    ASSERT_TRUE(a.ok() && b.ok());
    double largest = 0;
    for (const auto& p : cpu->model().parameters()) {
      largest = std::max(largest, p.grad().abs().max().item<double>());
    }
    const double dg = kTerms * std::numeric_limits<double>::epsilon() * largest;
    EXPECT_NEAR(a->metrics.loss, b->metrics.loss, dg);
    pbert::testing::ExpectSameGradientsAndWeights(pbert::testing::PretrainingModel(cpu->model()),
                                                  pbert::testing::PretrainingModel(gpu->model()),
                                                  dg, kLr, step, " (CPU, GPU)");
  }
}

// Resume on the GPU: the generators (CPU and CUDA), the optimizer's moments
// on the device and the weights, saved after two steps by the Checkpointer
// and loaded into a new trainee as a resumed run loads them, continue as
// the uninterrupted trainee does, with dropout on (the CUDA generator's
// draws: wrong generator states give other masks, and the runs part by the
// dropout's size at once). In double precision:
// the two run the same kernels on the same inputs, but a GPU's atomic adds
// may sum in another order from run to run, so the weights are compared to
// kTerms roundings of a double.
TEST(CudaTest, ResumeOnTheGpuContinuesTheRun) {
  SKIP_WITHOUT_GPU();
  auto communicator = distributed::Communicator::Single();
  TraineeOptions o;
  o.bert = model::testing::TinyOptions().hidden_dropout(0.1).attention_dropout(0.1);
  o.lamb = optim::LambOptions(1e-3);
  o.seed = 4;
  o.device = kGpu;
  o.dtype = torch::kDouble;
  const auto batches = testing::FourRowSteps(9);
  // Step 2's checkpoint, written and read as a run does: weights, the
  // optimizer's state, the generators in the trainer state.
  testing::ResumedRun run =
      testing::RunAndResume(o, *communicator, batches, 2, 5, 4, 8, 1e-3, "pbert_CudaTest_resume");
  ASSERT_EQ(run.error, "");
  EXPECT_FALSE(run.random.cuda.empty()) << "the CUDA generator's state is saved";
  auto& whole = run.whole;
  auto& resumed = run.resumed;
  const std::vector<double>& losses = run.losses;
  for (int step = 2; step < 5; ++step) {
    auto b = TrainStep(*resumed, *communicator, batches(step), 1e-3, {});
    ASSERT_TRUE(b.ok());
    const double a = losses[step - 2];
    EXPECT_NEAR(a, b->metrics.loss, 1e-12 * a) << "step " << step;
  }
  constexpr double kTerms = 1 << 16;
  auto pa = whole->model().named_parameters(), pb = resumed->model().named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    const double size = pa[k].value().abs().max().item<double>();
    EXPECT_LE(MaxAbsDiff(pa[k].value(), pb[k].value()),
              kTerms * std::numeric_limits<double>::epsilon() * size)
        << pa[k].key();
  }
}

// The fused LAMB kernels (kernels/lamb_cuda.h), and the fused gradient
// norm, against the _foreach step
// on the same GPU, from the same tensors, over three clipped steps: 30
// tensors (more than one launch's 24) of up to 6 million entries (more
// than one launch's 320 chunks of 16,384), in two groups as BERT's. Both
// compute each element by the same formula in fp32 (kernels/lamb_math.h);
// the kernels contract a multiply and an add into one rounding where the
// compiler may, and sum the norms in another order (in double), so each
// element may differ by a few fp32 roundings of the terms it is made of:
// per step at most kUlps roundings of the weight and of the step taken,
// and of the moments. With bf16 gradients and copies (master weights),
// each copy is its master rounded: within one bf16 rounding of the other
// side's.
TEST(CudaTest, TheFusedLambEqualsTheForeachStep) {
  SKIP_WITHOUT_GPU();
  constexpr double kF = 1.0 / (1 << 24), kUlps = 8;
  for (const bool masters : {false, true}) {
    torch::manual_seed(masters ? 2 : 1);
    const auto on_gpu = torch::TensorOptions().device(kGpu);
    std::vector<at::Tensor> initial;
    for (int i = 0; i < 29; ++i) initial.push_back(torch::randn({1 + 997 * i % 50000}, on_gpu));
    initial.push_back(torch::randn({6 << 20}, on_gpu) * 0.05);
    std::vector<at::Tensor> fused_w, foreach_w, fused_c, foreach_c;
    std::vector<std::pair<at::Tensor, at::Tensor>> fused_pairs, foreach_pairs;
    for (const auto& x : initial) {
      fused_w.push_back(x.clone().requires_grad_());
      foreach_w.push_back(x.clone().requires_grad_());
      if (masters) {
        fused_c.push_back(x.to(torch::kBFloat16).requires_grad_());
        foreach_c.push_back(x.to(torch::kBFloat16).requires_grad_());
        fused_pairs.emplace_back(fused_w.back(), fused_c.back());
        foreach_pairs.emplace_back(foreach_w.back(), foreach_c.back());
      }
    }
    auto make = [](const std::vector<at::Tensor>& w) {
      const auto with = optim::LambOptions(0.01).weight_decay(0.01);
      auto without = with;
      without.weight_decay(0).trust_ratio(false);
      std::vector<at::Tensor> a, b;
      for (size_t i = 0; i < w.size(); ++i) (i % 3 == 0 ? b : a).push_back(w[i]);
      std::vector<torch::optim::OptimizerParamGroup> groups;
      groups.emplace_back(a, std::make_unique<optim::LambOptions>(with));
      groups.emplace_back(b, std::make_unique<optim::LambOptions>(without));
      return std::make_unique<optim::Lamb>(std::move(groups), with);
    };
    auto fused = make(fused_w), plain = make(foreach_w);
    fused->UseFusedKernels(true);
    plain->UseFusedKernels(false);
    if (masters) {
      fused->BindModelWeights(fused_pairs);
      plain->BindModelWeights(foreach_pairs);
    }
    std::vector<double> bound(initial.size(), 0.0);
    for (int t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < initial.size(); ++i) {
        at::Tensor g = torch::randn(initial[i].sizes(), on_gpu) * (i % 2 == 0 ? 1e-3 : 1.0);
        if (masters) {
          g = g.to(torch::kBFloat16);
          fused_c[i].mutable_grad() = g.clone();
          foreach_c[i].mutable_grad() = g.clone();
        } else {
          fused_w[i].mutable_grad() = g.clone();
          foreach_w[i].mutable_grad() = g.clone();
        }
      }
      // Clipping's global norm by the fused kernel against the _foreach
      // norms: squares of the same fp32 values summed in double in another
      // order, within 2^-40 of the norm.
      const std::vector<at::Tensor>& with_grads = masters ? fused_c : fused_w;
      const double fused_norm = optim::GlobalGradNorm(with_grads, true).item<double>();
      const double plain_norm = optim::GlobalGradNorm(with_grads, false).item<double>();
      EXPECT_NEAR(fused_norm, plain_norm, plain_norm / (1ull << 40)) << "step " << t;
      const at::Tensor clip = torch::full({}, 0.6, on_gpu.dtype(torch::kDouble));
      fused->ScaleGradients(clip);
      plain->ScaleGradients(clip);
      std::vector<at::Tensor> before;
      for (const auto& w : foreach_w) before.push_back(w.detach().clone());
      fused->step();
      plain->step();
      EXPECT_STREQ(fused->last_path(), "fused");
      EXPECT_STREQ(plain->last_path(), "foreach");
      for (size_t i = 0; i < initial.size(); ++i) {
        const double moved = MaxAbsDiff(foreach_w[i], before[i]);
        const double size = foreach_w[i].abs().max().item<double>();
        bound[i] += kUlps * kF * (moved + size);
        EXPECT_LE(MaxAbsDiff(fused_w[i], foreach_w[i]), bound[i])
            << "weight " << i << " after step " << t << (masters ? " (master weights)" : "");
        if (masters) {
          EXPECT_LE(MaxAbsDiff(fused_c[i], foreach_c[i]), size / 128 + bound[i])
              << "bf16 copy " << i << " after step " << t;
          EXPECT_TRUE(torch::equal(fused_c[i], fused_w[i].to(torch::kBFloat16)))
              << "bf16 copy " << i << " is not its master rounded, after step " << t;
        }
      }
    }
    for (size_t i = 0; i < initial.size(); ++i) {
      const auto& a = static_cast<const optim::LambParamState&>(
          *fused->state().at(torch_compat::OptimizerStateKey(fused_w[i])));
      const auto& b = static_cast<const optim::LambParamState&>(
          *plain->state().at(torch_compat::OptimizerStateKey(foreach_w[i])));
      EXPECT_LE(MaxAbsDiff(a.exp_avg(), b.exp_avg()),
                3 * kUlps * kF * b.exp_avg().abs().max().item<double>())
          << "first moment " << i;
      EXPECT_LE(MaxAbsDiff(a.exp_avg_sq(), b.exp_avg_sq()),
                3 * kUlps * kF * b.exp_avg_sq().abs().max().item<double>())
          << "second moment " << i;
    }
    EXPECT_GT(MaxAbsDiff(fused_w.back(), initial.back()), 0.0) << "the weights moved";
  }
}

// The fused layers' CUDA kernels against their reference in double
// precision (tests/model/fused_kernels_check.h; on the CPU, the same
// through the kernels' twins: FusedLayersTest.TheKernelsPathThroughTheTwinsIsWithinRounding).
TEST(CudaTest, FusedLayerKernelsEqualTheReferenceWithinTheirRounding) {
  SKIP_WITHOUT_GPU();
  if (!model::FusedLayerKernelsBuilt()) GTEST_SKIP() << "needs a build with the CUDA kernels";
  {
    // Which products the model hands the kernels: autocast's dtype where it
    // is on, else the input's; fp16 and double go to the unfused modules.
    const at::Tensor x = torch::zeros({2, 64}, torch::TensorOptions().device(kGpu));
    const at::Tensor bias = torch::zeros({64}, x.options());
    using model::FusedPath;
    EXPECT_EQ(model::BiasGeluPath(x, bias), FusedPath::kKernels);
    EXPECT_EQ(model::BiasGeluPath(x.to(at::kDouble), bias), FusedPath::kUnfused);
    {
      model::AutocastGuard autocast(model::Precision::kBf16, c10::DeviceType::CUDA);
      EXPECT_EQ(model::BiasDropoutAddNormPath(x, bias, bias), FusedPath::kKernels);
    }
    model::AutocastGuard autocast(model::Precision::kFp16, c10::DeviceType::CUDA);
    EXPECT_EQ(model::BiasDropoutAddNormPath(x, bias, bias), FusedPath::kUnfused);
  }
  model::testing::ExpectFusedKernelsWithinRounding(kGpu, 3001);
}

// No hidden wait: after a warm-up step, training steps in bf16 with master
// weights and the fused LAMB (and in bf16 autocast over fp32 weights with
// the _foreach LAMB) run with LibTorch's synchronization debug mode set to
// error, so that any operation that makes the host wait for the GPU
// throws, but in the step's one read (train/host_read.h, which allows it).
TEST(CudaTest, AStepWaitsForTheGpuOnlyInItsOneRead) {
  SKIP_WITHOUT_GPU();
  auto communicator = distributed::Communicator::Single();
  auto instances = model::testing::RandomInstances(40, 6, 60, 97, 12);
  auto rows = model::testing::PackInOrder(instances, 4, 128);
  const std::vector<data::PackedBatch> batches = {*data::MakeBatch(rows, {128, 4, 0})};
  for (const bool lean : {true, false}) {
    TraineeOptions o = Bf16OnTheGpu(6);
    o.bert.max_position_embeddings(128).hidden_dropout(0.1).attention_dropout(0.1);
    o.master_weights = lean;
    o.fused_optimizer = lean;
    auto trainee = std::move(*Trainee::Make(o, *communicator));
    auto prepared = Prepare(batches, trainee->input_plan(), {&trainee->task()});
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    StepOptions step;
    step.max_grad_norm = 1.0;
    ASSERT_TRUE(TrainStep(*trainee, *communicator, *prepared, 1e-3, step).ok());  // warm-up
    const uint64_t reads = HostReads();
    for (int k = 0; k < 2; ++k) {
      absl::StatusOr<StepResult> result = absl::UnknownError("not run");
      std::string thrown;
      {
        gpu::WaitCheck refuse(/*refuse=*/true);
        try {
          result = TrainStep(*trainee, *communicator, *prepared, 1e-3, step);
        } catch (const std::exception& e) {
          thrown = FirstLine(e);
        }
      }
      EXPECT_EQ(thrown, "") << (lean ? "master weights, fused LAMB" : "autocast, _foreach LAMB")
                            << ": a step waited for the GPU outside its read";
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(result->applied);
      EXPECT_STREQ(trainee->optimizer().last_path(), lean ? "fused" : "foreach");
    }
    EXPECT_EQ(HostReads() - reads, 2u);
  }
}

// Resume with bf16 master weights on the GPU: the checkpoint keeps the
// fp32 masters (what weights() holds) and the optimizer's state; a new
// trainee loads them, makes its bf16 copies from them, and continues as
// the uninterrupted one does. The two run the same kernels on the same
// inputs; only the order of a GPU's atomic adds may differ from run to
// run (attention's backward, split reductions), by fp32 roundings of bf16
// products: the losses agree to well within bf16's rounding (2^-9).
TEST(CudaTest, ResumeWithMasterWeightsContinuesTheRun) {
  SKIP_WITHOUT_GPU();
  auto communicator = distributed::Communicator::Single();
  TraineeOptions o = Bf16OnTheGpu(8);
  o.master_weights = true;
  const auto batches = testing::FourRowSteps(10);
  testing::ResumedRun run = testing::RunAndResume(o, *communicator, batches, 2, 5, 4, 8, 1e-3,
                                                  "pbert_CudaTest_resume_masters");
  ASSERT_EQ(run.error, "");
  ASSERT_TRUE(run.whole->has_master_weights());
  auto& whole = run.whole;
  auto& resumed = run.resumed;
  const std::vector<double>& losses = run.losses;
  for (int step = 2; step < 5; ++step) {
    auto b = TrainStep(*resumed, *communicator, batches(step), 1e-3, {});
    ASSERT_TRUE(b.ok());
    EXPECT_NEAR(losses[step - 2], b->metrics.loss, losses[step - 2] / 4096) << "step " << step;
  }
  auto pa = whole->weights().named_parameters(), pb = resumed->weights().named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_EQ(pb[k].value().scalar_type(), torch::kFloat);
    EXPECT_LE(MaxAbsDiff(pa[k].value(), pb[k].value()), 3 * 2e-3) << pa[k].key();
  }
}

// NCCL's all-reduce on the GPU with a group of one: the process group
// forms (a rendezvous in memory), and sums of a gradient-sized float tensor
// and of doubles come back as they went in.
// FP8 products through at::_scaled_mm against the emulation
// (model.fp8_emulation) on the same device, the same inputs and scales:
// both quantize with the same operations, and both accumulate exact
// products of float8 values in fp32, so they differ by the order of the
// sums, within 2 (K + 2) fp32 epsilons of the sum of the terms'
// magnitudes (bounded here by the products of the unquantized magnitudes
// times (1 + 2^-3)^2 for e4m3's, (1 + 2^-3)(1 + 2^-2) for e5m2's
// rounding). Token counts not a multiple of 16 (37) are padded inside.
TEST(CudaTest, Fp8ProductsEqualTheEmulationWithinHopperAccumulation) {
  SKIP_WITHOUT_GPU();
  model::Fp8Options options;
  if (absl::Status runs = model::CheckFp8(options, model::testing::TinyOptions(), kGpu);
      !runs.ok()) {
    GTEST_SKIP() << runs.message();
  }
  const int64_t M = 37, K = 64, N = 48;
  torch::manual_seed(4);
  const auto on_gpu = torch::TensorOptions().device(kGpu);
  const at::Tensor x0 = at::randn({M, K}, on_gpu) * 3, w0 = at::randn({N, K}, on_gpu) * 0.05;
  const at::Tensor b0 = at::randn({N}, on_gpu), g = at::randn({M, N}, on_gpu) * 1e-4;
  std::vector<at::Tensor> y, dx, dw, db;
  for (bool emulate : {true, false}) {
    options.emulation = emulate;
    model::Fp8Scaling scaling(1, options, kGpu);
    scaling.scale()[0].copy_(at::tensor({16.0f, 1024.0f, 262144.0f}));
    const at::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
    const at::Tensor b = b0.clone().requires_grad_();
    const at::Tensor out = model::Fp8Linear(x, w, b, scaling.Slot(0), true);
    out.backward(g);
    y.push_back(out.detach());
    dx.push_back(x.grad());
    dw.push_back(w.grad());
    db.push_back(b.grad());
  }
  // Hopper's FP8 tensor cores keep about 14 bits of a partial sum between
  // their promotions to fp32 (DeepSeek-V3's report, Section 3.3.2), so the
  // bound takes that unit, 2^-13, over the whole depth, not fp32's.
  constexpr double kAccumulator = 1.0 / (1 << 13);
  const double e4 = 1.125, e5 = 1.25;
  auto bound = [&](const at::Tensor& magnitude, int64_t depth, double rounding) {
    return (magnitude * (rounding * 2 * (depth + 2) * kAccumulator)).to(at::kCPU, at::kDouble);
  };
  auto check = [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& limit,
                  const char* what) {
    const at::Tensor error = (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs();
    EXPECT_LE((error - limit).max().item<double>(), 0.0)
        << what << ": largest difference " << error.max().item<double>();
  };
  check(y[1], y[0], bound(at::mm(x0.abs(), w0.abs().t()) + b0.abs(), K, e4 * e4), "y");
  check(dx[1], dx[0], bound(at::mm(g.abs(), w0.abs()), N, e5 * e4), "dx");
  check(dw[1], dw[0], bound(at::mm(g.abs().t(), x0.abs()), M, e5 * e4), "dw");
  EXPECT_TRUE(at::equal(db[1], db[0])) << "the bias gradient is the same sum";
}

// A few fp8 steps of the tiny BERT on the GPU: finite losses, the scales
// taken from the recorded maxima, and resume continuing the run.
TEST(CudaTest, Fp8StepsRunAndResume) {
  SKIP_WITHOUT_GPU();
  TraineeOptions o = Bf16OnTheGpu(5);
  o.precision = model::Precision::kFp8;
  o.master_weights = true;
  o.fp8.amax_history = 4;
  if (absl::Status runs = model::CheckFp8(o.fp8, o.bert, kGpu); !runs.ok()) {
    GTEST_SKIP() << runs.message();
  }
  auto communicator = distributed::Communicator::Single();
  const auto batches = testing::FourRowSteps(10);
  testing::ResumedRun run =
      testing::RunAndResume(o, *communicator, batches, 3, 6, 4, 8, 1e-3, "pbert_CudaTest_fp8");
  ASSERT_EQ(run.error, "");
  for (double loss : run.losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_TRUE(run.whole->fp8()->scale().ne(1).any().item<bool>()) << "the scales never moved";
  for (int step = 3; step < 6; ++step) {
    auto b = TrainStep(*run.resumed, *communicator, batches(step), 1e-3, {});
    ASSERT_TRUE(b.ok());
    // The same kernels on the same inputs; cuBLAS's products are
    // deterministic on one GPU for one shape.
    EXPECT_EQ(run.losses[step - 3], b->metrics.loss) << "step " << step;
  }
}

// The fused layers' kernels with the seed in a slot of device memory (a
// captured step's, model::DropoutSeedSlots) draw the mask of that seed
// passed by value: the same outputs and gradients, bit for bit.
TEST(CudaTest, TheFusedKernelsReadTheirSeedFromASlot) {
  SKIP_WITHOUT_GPU();
  if (!model::FusedLayerKernelsBuilt()) GTEST_SKIP() << "needs a build with the CUDA kernels";
  torch::manual_seed(9);
  const auto on_gpu = torch::TensorOptions().device(kGpu);
  const at::Tensor y0 = at::randn({37, 64}, on_gpu), r0 = at::randn({37, 64}, on_gpu);
  const at::Tensor bias0 = at::randn({64}, on_gpu), gamma0 = at::randn({64}, on_gpu) + 1;
  const at::Tensor beta0 = at::randn({64}, on_gpu), g = at::randn({37, 64}, on_gpu);
  const at::Tensor slot = at::full({1}, static_cast<int64_t>(0x5eed5eed5eedULL), on_gpu.dtype(at::kLong));
  std::vector<std::vector<at::Tensor>> results;
  for (bool in_slot : {false, true}) {
    kernels::DropoutBits bits;
    bits.threshold = 1u << 30;  // p = 1/4
    bits.seed = in_slot ? 0 : 0x5eed5eed5eedULL;
    if (in_slot) bits.seed_slot = reinterpret_cast<const uint64_t*>(slot.data_ptr<int64_t>());
    std::vector<at::Tensor> in = {y0.clone(), bias0.clone(), r0.clone(), gamma0.clone(),
                                  beta0.clone()};
    for (auto& t : in) t.requires_grad_();
    const at::Tensor out = model::BiasDropoutAddNorm(in[0], in[1], in[2], in[3], in[4], bits, 1e-12);
    out.backward(g);
    std::vector<at::Tensor> r = {out.detach()};
    for (auto& t : in) r.push_back(t.grad());
    results.push_back(r);
  }
  for (size_t k = 0; k < results[0].size(); ++k) {
    EXPECT_TRUE(at::equal(results[0][k], results[1][k])) << "output or gradient " << k;
  }
}

// Steps of two micro-batches of four rows (at most two sequences of 6 to 30
// tokens each; vocabulary 97), drawn with `seed`: 12 steps.
std::function<std::vector<data::PackedBatch>(int)> TwoMicroBatchSteps(uint32_t seed) {
  auto instances = std::make_shared<std::vector<data::Instance>>(
      model::testing::RandomInstances(200, 6, 30, 97, seed));
  auto rows = std::make_shared<Rows>(model::testing::PackInOrder(*instances, 2, 64));
  return [instances, rows](int step) {
    std::vector<data::PackedBatch> out;
    for (int k = 0; k < 2; ++k) {
      const auto first = rows->begin() + 8 * step + 4 * k;
      out.push_back(*data::MakeBatch(Rows(first, first + 4), {64, 2, 0}));
    }
    return out;
  };
}

struct Trained {
  std::unique_ptr<Trainee> trainee;
  std::vector<double> losses;
  std::string error;
};

Trained Train(const TraineeOptions& o, distributed::Communicator& communicator,
              const std::function<std::vector<data::PackedBatch>(int)>& batches, int steps) {
  Trained t;
  auto trainee = Trainee::Make(o, communicator);
  if (!trainee.ok()) {
    t.error = trainee.status().ToString();
    return t;
  }
  t.trainee = std::move(*trainee);
  for (int step = 0; step < steps; ++step) {
    auto result = TrainStep(*t.trainee, communicator, batches(step), 1e-3, {});
    if (!result.ok()) {
      t.error = absl::StrCat("step ", step, ": ", result.status().ToString());
      return t;
    }
    t.losses.push_back(result->metrics.loss);
  }
  return t;
}

// The captured step (run.cuda_graphs) against eager steps, five steps of
// two micro-batches with dropout on (the CUDA generator's masks and the
// fused layers' seeds in slots), the first two micro-batches eager and the
// rest replays of one graph. A replay runs the eager micro-batch's kernels
// on the same inputs, so in fp32 it must equal eager as exactly as two
// eager runs equal each other: bit for bit where the eager kernels are
// deterministic (a spread of 0 between two eager runs), else within 4 times
// that spread. In bf16 through FlashAttention (whose backward may sum in
// another order from run to run) the losses agree to 2^-12 of themselves,
// a few bf16 roundings. A captured run stopped at step 2 and resumed
// (capturing anew) continues as the run does, to the same bounds.
TEST(CudaTest, ACapturedStepEqualsTheEagerOneAndResumes) {
  SKIP_WITHOUT_GPU();
  if (!model::FusedLayerKernelsBuilt()) GTEST_SKIP() << "needs a build with the CUDA kernels";
  auto communicator = distributed::Communicator::Single();
  const auto batches = TwoMicroBatchSteps(12);
  constexpr int kSteps = 5;
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16, varlen through FlashAttention" : "fp32, dense");
    TraineeOptions o = Bf16OnTheGpu(6);
    o.bert.static_shapes(true).hidden_dropout(0.1).attention_dropout(0.1);
    if (!bf16) {
      o.bert.attention(model::AttentionKind::kDense);
      o.precision = model::Precision::kFp32;
    }
    Trained a = Train(o, *communicator, batches, kSteps);
    Trained b = Train(o, *communicator, batches, kSteps);
    o.cuda_graphs = true;
    Trained c = Train(o, *communicator, batches, kSteps);
    ASSERT_EQ(a.error + b.error + c.error, "");
    EXPECT_EQ(c.trainee->graphs()->graphs(), 1) << "one shape: one graph";
    // `spread`: how far two eager runs' losses of the step lie apart.
    auto same = [&](double expected, double captured, double spread, const std::string& what) {
      if (bf16) {
        EXPECT_NEAR(expected, captured, std::abs(expected) / 4096) << what;
      } else {
        EXPECT_LE(std::abs(expected - captured), 4 * spread) << what;
      }
    };
    for (int step = 0; step < kSteps; ++step) {
      same(a.losses[step], c.losses[step], std::abs(a.losses[step] - b.losses[step]),
           absl::StrCat("loss of step ", step));
    }
    if (!bf16) {
      auto pa = a.trainee->weights().named_parameters();
      auto pb = b.trainee->weights().named_parameters();
      auto pc = c.trainee->weights().named_parameters();
      for (size_t k = 0; k < pa.size(); ++k) {
        EXPECT_LE(MaxAbsDiff(pa[k].value(), pc[k].value()),
                  4 * MaxAbsDiff(pa[k].value(), pb[k].value()))
            << pa[k].key();
      }
    }
    testing::ResumedRun run = testing::RunAndResume(o, *communicator, batches, 2, kSteps, 8, 16,
                                                    1e-3, "pbert_CudaTest_captured_resume");
    ASSERT_EQ(run.error, "");
    for (int step = 2; step < kSteps; ++step) {
      auto r = TrainStep(*run.resumed, *communicator, batches(step), 1e-3, {});
      ASSERT_TRUE(r.ok()) << r.status();
      same(run.losses[step - 2], r->metrics.loss, std::abs(a.losses[step] - b.losses[step]),
           absl::StrCat("resumed, step ", step));
    }
  }
}

// The task models moved to the GPU (the span head's, the classifier's; bf16
// with and without fp32 master weights, the fused layers where built):
// Q, K and V of each layer still one buffer on the GPU
// (tests/model/qkv_buffer.h), in the model the step computes with and in
// the weights LAMB updates, as made and after steps (on the CPU:
// FineTuningStepTest.TheQkvBufferStaysOneThroughTheMoveAndTheSteps).
TEST(CudaTest, TheTaskModelsKeepOneQkvBufferOnTheGpu) {
  SKIP_WITHOUT_GPU();
  auto communicator = distributed::Communicator::Single();
  using tasks::testing::HeadKind;
  for (const HeadKind head : {HeadKind::kSpan, HeadKind::kClasses, HeadKind::kTokens,
                              HeadKind::kMultiLabel}) {
    const auto task = tasks::testing::TaskOf(tasks::testing::RandomFeatures(47, 40), head, 3);
    const tasks::PackedSet& set = *task->train();
    for (const bool masters : {false, true}) {
      const std::string what = absl::StrCat(tasks::testing::HeadName(head),
                                            masters ? ", bf16 with master weights" : ", bf16");
      TraineeOptions o = Bf16OnTheGpu(7);
      o.task = task;
      o.bert.fused_layers(model::FusedLayerKernelsBuilt());
      o.lamb = optim::LambOptions(1e-3).trust_ratio(false);  // AdamW, fine-tuning's
      o.master_weights = masters;
      auto trainee = Trainee::Make(o, *communicator);
      ASSERT_TRUE(trainee.ok()) << what << ": " << trainee.status();
      const int64_t layers = o.bert.num_layers();
      for (int step = 0; step < 3; ++step) {
        const std::string when = what + (step == 0 ? ", as made" : ", after a step");
        for (torch::nn::Module* module : {&(*trainee)->model(), &(*trainee)->weights()}) {
          model::testing::ExpectOneQkvBuffer(*module, layers, when);
          for (const auto& p : module->parameters()) {
            ASSERT_TRUE(p.is_cuda()) << when << ": a parameter left on the CPU";
          }
        }
        auto r = TrainStep(**trainee, *communicator, tasks::testing::StepBatches(set, step, 4, 1),
                           1e-3, {}, &set);
        ASSERT_TRUE(r.ok()) << when << ": " << r.status();
        EXPECT_TRUE(std::isfinite(r->metrics.loss)) << when;
      }
    }
  }
}

TEST(CudaTest, NcclSumsOnOneGpu) {
  SKIP_WITHOUT_GPU();
#ifndef PBERT_WITH_NCCL
  GTEST_SKIP() << "needs a build with NCCL";
#else
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, 0, 1);
  at::Tensor grads = torch::randn({1 << 20}, torch::TensorOptions().device(kGpu));
  const at::Tensor before = grads.clone();
  std::vector<at::Tensor> tensors = {grads};
  nccl->allreduce(tensors)->wait();
  EXPECT_TRUE(torch::equal(grads, before));
  std::vector<at::Tensor> doubles = {torch::tensor({1.5, -2.25}, torch::TensorOptions().dtype(torch::kDouble).device(kGpu))};
  nccl->allreduce(doubles)->wait();
  EXPECT_TRUE(torch::equal(doubles[0].cpu(), torch::tensor({1.5, -2.25}, torch::kDouble)));
#endif
}

}  // namespace
}  // namespace pbert::train
