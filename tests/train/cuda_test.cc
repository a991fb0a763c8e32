// What only a GPU can show: the varlen layout through FlashAttention, the
// step on CUDA against the CPU's, resume on CUDA, and NCCL. Every test skips
// with one line where this build has no CUDA or no GPU is visible; on a GPU
// machine scripts/gpu runs them.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <limits>

#include "gpu/gpu.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "model/losses.h"
#include "model/precision.h"
#include "tests/model/fixtures.h"
#include "train/checkpointer.h"
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

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

// Packed rows at depths 1-8, BERT with 64-wide heads (FlashAttention's
// kind), bf16 autocast on the GPU through FlashAttention's varlen kernel,
// against the dense layout in fp32 on the same GPU. bf16 keeps 8
// significant bits (a relative rounding of 2^-9 per operation): the
// tolerances are bf16's, as the CPU's bf16 equivalence test derives them
// (tests/model/bert_test.cc): logits within 8 bf16 ulps of the largest
// logit (1/32 of it), the loss within 1%, each gradient within 5% of its
// largest entry.
TEST(CudaTest, VarlenThroughFlashAttentionEqualsDenseFp32) {
  SKIP_WITHOUT_GPU();
  for (int depth : {1, 2, 4, 8}) {
    torch::manual_seed(depth);
    auto options = model::testing::TinyOptions().hidden_size(128).num_heads(2);  // head width 64
    model::BertForPreTraining dense(options.attention(model::AttentionKind::kDense));
    model::BertForPreTraining varlen(options.attention(model::AttentionKind::kVarlen));
    {
      torch::NoGradGuard no_grad;
      auto from = dense->named_parameters();
      for (auto& p : varlen->named_parameters()) p.value().copy_(from[p.key()]);
    }
    dense->to(kGpu);
    varlen->to(kGpu);
    auto instances = model::testing::RandomInstances(24, 6, 30, 97, 500 + depth);
    auto rows = model::testing::PackInOrder(instances, depth, 64);
    const data::PackedBatch batch = *data::MakeBatch(rows, {64, depth, 0});
    auto run = [&](model::BertForPreTraining& m, model::Precision precision) {
      m->zero_grad();
      const model::Inputs inputs = model::testing::InputsFor(m, batch, precision);
      if (m->options.attention() == model::AttentionKind::kVarlen &&
          precision == model::Precision::kBf16) {
        EXPECT_TRUE(std::holds_alternative<model::VarlenBoundaries>(inputs.attention))
            << "FlashAttention's varlen kernel is not in use";
      }
      model::PretrainingLogits logits;
      at::Tensor loss;
      {
        model::AutocastGuard autocast(precision, c10::DeviceType::CUDA);
        logits = m(inputs);
        loss = model::PretrainingLoss(model::ComputeSums(logits, inputs),
                                      model::MlmLossMode::kPerToken, TotalsOf(batch));
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
    for (const auto& p : cpu->model()->parameters()) {
      largest = std::max(largest, p.grad().abs().max().item<double>());
    }
    const double dg = kTerms * std::numeric_limits<double>::epsilon() * largest;
    EXPECT_NEAR(a->metrics.loss, b->metrics.loss, dg);
    auto pa = cpu->model()->named_parameters(), pb = gpu->model()->named_parameters();
    for (size_t k = 0; k < pa.size(); ++k) {
      EXPECT_LE(MaxAbsDiff(pb[k].value().grad(), pa[k].value().grad()), dg)
          << "gradient of " << pa[k].key() << " at step " << step;
      EXPECT_LE(MaxAbsDiff(pb[k].value(), pa[k].value()),
                (step + 1) * kLr * dg / optim::LambOptions().eps())
          << pa[k].key() << " after step " << step;
    }
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
  auto instances = model::testing::RandomInstances(60, 6, 30, 97, 9);
  auto rows = model::testing::PackInOrder(instances, 2, 64);
  auto batches = [&](int step) {
    Rows part(rows.begin() + 4 * step, rows.begin() + 4 * step + 4);
    return std::vector<data::PackedBatch>{*data::MakeBatch(part, {64, 2, 0})};
  };
  // The generators are the process's: the uninterrupted run takes all its
  // steps before the resumed one restores them, as a new process would.
  auto whole = std::move(*Trainee::Make(o, *communicator));
  for (int step = 0; step < 2; ++step) ASSERT_TRUE(TrainStep(*whole, *communicator, batches(step), 1e-3, {}).ok());
  // Step 2's checkpoint, written and read as a run does (train/checkpointer.h):
  // weights, the optimizer's state, the generators in the trainer state.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "pbert_CudaTest_resume";
  std::filesystem::remove_all(dir);
  CheckpointOptions checkpoints;
  checkpoints.run_dir = dir.string();
  checkpoints.every_steps = 0;
  Checkpointer checkpointer(checkpoints, *communicator);
  TrainerState state;
  state.loop.step = 2;
  state.random = whole->randomness().Save();
  EXPECT_FALSE(state.random.cuda.empty()) << "the CUDA generator's state is saved";
  ASSERT_TRUE(checkpointer.Save(2, *whole->model(), whole->optimizer(), ToJson(state)).ok());
  std::vector<double> losses;
  for (int step = 2; step < 5; ++step) {
    auto a = TrainStep(*whole, *communicator, batches(step), 1e-3, {});
    ASSERT_TRUE(a.ok());
    losses.push_back(a->metrics.loss);
  }
  auto info = ReadCheckpointInfo(checkpointer.last());
  ASSERT_TRUE(info.ok()) << info.status();
  auto resumed = std::move(*Trainee::Make(o, *communicator));
  ASSERT_TRUE(LoadCheckpointWeights(info->dir, *resumed->model(), resumed->optimizer(), kGpu).ok());
  ASSERT_TRUE(resumed->randomness().Restore(info->trainer.random).ok());
  std::filesystem::remove_all(dir);
  for (int step = 2; step < 5; ++step) {
    auto b = TrainStep(*resumed, *communicator, batches(step), 1e-3, {});
    ASSERT_TRUE(b.ok());
    const double a = losses[step - 2];
    EXPECT_NEAR(a, b->metrics.loss, 1e-12 * a) << "step " << step;
  }
  constexpr double kTerms = 1 << 16;
  auto pa = whole->model()->named_parameters(), pb = resumed->model()->named_parameters();
  for (size_t k = 0; k < pa.size(); ++k) {
    const double size = pa[k].value().abs().max().item<double>();
    EXPECT_LE(MaxAbsDiff(pa[k].value(), pb[k].value()),
              kTerms * std::numeric_limits<double>::epsilon() * size)
        << pa[k].key();
  }
}

// NCCL's all-reduce on the GPU with a group of one: the process group
// forms (a rendezvous in memory), and sums of a gradient-sized float tensor
// and of doubles come back as they went in.
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
