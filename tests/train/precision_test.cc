#include "model/precision.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/platform.h"
#include "common/torch_compat_ops.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "tests/train/model_batches.h"

namespace pbert::model {
namespace {

TEST(PrecisionTest, Resolve) {
  // bf16 where LibTorch runs it here (any CPU but one whose oneDNN is held
  // below its instructions), else an error naming the key.
  auto bf16 = ResolvePrecision(Precision::kBf16, c10::Device(c10::kCPU));
  if (CpuRunsBf16().ok()) {
    EXPECT_EQ(*bf16, Precision::kBf16);
  } else {
    EXPECT_EQ(bf16.status().message(),
              absl::StrCat("model.precision bf16: LibTorch cannot run bf16 on this CPU (",
                           CpuRunsBf16().message(), "); use auto or fp32"));
  }
  EXPECT_EQ(*ResolvePrecision(Precision::kFp16, c10::Device(c10::kCUDA, 0)), Precision::kFp16);
  // fp8 keeps its name; its products are CheckFp8's to refuse (model/fp8.h).
  EXPECT_EQ(*ResolvePrecision(Precision::kFp8, c10::Device(c10::kCUDA, 0)), Precision::kFp8);
  auto cpu_fp16 = ResolvePrecision(Precision::kFp16, c10::Device(c10::kCPU));
  ASSERT_FALSE(cpu_fp16.ok());
  EXPECT_NE(cpu_fp16.status().message().find("needs a CUDA device"), std::string::npos);
  // auto follows the CPU: bf16 only where it computes bf16 in hardware and
  // LibTorch runs it.
  EXPECT_EQ(*ResolvePrecision(Precision::kAuto, c10::Device(c10::kCPU)),
            Cpu().bf16() && CpuRunsBf16().ok() ? Precision::kBf16 : Precision::kFp32);
  EXPECT_EQ(std::string(ParseChoice<Precision>("fp1", "model.precision").status().message()),
            "model.precision 'fp1' is not one of: auto, fp32, bf16, fp16 or fp8; did you mean 'fp16'?");
}

TEST(PrecisionTest, Bf16AutocastOnCpuKeepsFp32WeightsAndCloseLogits) {
  if (!CpuRunsBf16().ok()) GTEST_SKIP() << "LibTorch cannot run bf16 here: " << CpuRunsBf16();
  torch::manual_seed(2);
  BertForPreTraining model(testing::TinyOptions());
  model->eval();
  auto instances = testing::RandomInstances(4, 8, 20, 97, 9);
  auto batch = *data::MakeBatch(testing::PackInOrder(instances, 2, 64), {64, 2, 0});
  auto reference = testing::Forward(model, batch);
  PretrainingLogits mixed;
  {
    AutocastGuard guard(Precision::kBf16, c10::DeviceType::CPU);
    EXPECT_TRUE(torch_compat::AutocastEnabled(c10::DeviceType::CPU));
    mixed = testing::Forward(model, batch, Precision::kBf16);
  }
  EXPECT_FALSE(torch_compat::AutocastEnabled(c10::DeviceType::CPU));
  EXPECT_EQ(mixed.mlm.scalar_type(), at::kBFloat16);  // computed in bf16
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
  double error = (mixed.mlm.to(at::kFloat) - reference.mlm).abs().max().item<double>();
  double size = reference.mlm.abs().max().item<double>();
  EXPECT_LT(error, 0.05 * size + 0.02);
  EXPECT_GT(error, 0.0);  // it did run in lower precision
}

TEST(LossScalerTest, SkipsAndBacksOffOnOverflowGrowsAfterGoodSteps) {
  LossScaler scaler(1024.0, 3);
  auto w = torch::zeros({2}).set_requires_grad(true);
  w.mutable_grad() = torch::tensor({2048.0f, -1024.0f});
  EXPECT_TRUE(scaler.Unscale({w}).item<bool>());
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({2.0f, -1.0f})));
  scaler.Update(true);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 2048.0);  // three good steps in a row
  w.mutable_grad() = torch::tensor({std::numeric_limits<float>::infinity(), 1.0f});
  EXPECT_FALSE(scaler.Unscale({w}).item<bool>());
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.Scale(torch::tensor(1.5f)).item<float>(), 1536.0f);
}

}  // namespace
}  // namespace pbert::model
