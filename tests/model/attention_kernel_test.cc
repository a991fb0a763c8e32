// model.varlen_kernel on the CPU: the call to cuDNN's attention built from
// the schema the running LibTorch registered (the schemas of LibTorch 2.11
// and 2.12, parsed here, and one without sequence offsets), and the choice
// refused in one line where it cannot run. The kernel itself runs on a GPU
// only (tests/train/cuda_test.cc, VarlenKernelTest).
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/torch.h>

#include <string>

#include "common/torch_compat.h"
#include "gpu/gpu.h"
#include "gtest/gtest.h"
#include "model/attention.h"
#include "model/inputs.h"
#include "model/op_arguments.h"
#include "model/precision.h"
#include "tests/model/fixtures.h"

namespace pbert::model {
namespace {

// aten::_cudnn_attention_forward as LibTorch 2.11 registers it; 2.12 adds
// two defaulted arguments at the end.
constexpr char kSchema211[] =
    "aten::_cudnn_attention_forward(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
    "Tensor? cum_seq_q, Tensor? cum_seq_k, SymInt max_q, SymInt max_k, bool compute_log_sumexp, "
    "float dropout_p=0.0, bool is_causal=False, bool return_debug_mask=False, *, float? "
    "scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt "
    "max_q, SymInt max_k, Tensor philox_seed, Tensor philox_offset, Tensor debug_attn_mask)";
constexpr char kSchema212[] =
    "aten::_cudnn_attention_forward(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
    "Tensor? cum_seq_q, Tensor? cum_seq_k, SymInt max_q, SymInt max_k, bool compute_log_sumexp, "
    "float dropout_p=0.0, bool is_causal=False, bool return_debug_mask=False, *, float? "
    "scale=None, Tensor? seqused_k=None, Tensor? block_table=None) -> (Tensor output, Tensor "
    "logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor "
    "philox_seed, Tensor philox_offset, Tensor debug_attn_mask)";

std::vector<std::pair<std::string, c10::IValue>> Named(const at::Tensor& q,
                                                       const at::Tensor& cu) {
  return {{"query", q},       {"key", q},          {"value", q},
          {"attn_bias", {}},  {"cum_seq_q", cu},   {"cum_seq_k", cu},
          {"max_q", 7},       {"max_k", 7},        {"compute_log_sumexp", true},
          {"dropout_p", 0.1}, {"is_causal", false}, {"return_debug_mask", false}};
}

TEST(ArgumentsByNameTest, FollowTheSchemaOfTheRunningLibTorch) {
  const at::Tensor q = at::zeros({5, 2, 8}), cu = at::tensor({0, 2, 5}, at::kInt);
  for (const char* text : {kSchema211, kSchema212}) {
    const c10::FunctionSchema schema = torch::jit::parseSchema(text);
    auto stack = ArgumentsByName(schema, Named(q, cu));
    ASSERT_TRUE(stack.ok()) << stack.status();
    ASSERT_EQ(stack->size(), schema.arguments().size());
    EXPECT_TRUE((*stack)[0].toTensor().is_same(q));
    EXPECT_TRUE((*stack)[3].isNone());
    EXPECT_TRUE((*stack)[4].toTensor().is_same(cu));
    EXPECT_EQ((*stack)[6].toInt(), 7);
    EXPECT_TRUE((*stack)[8].toBool());
    EXPECT_DOUBLE_EQ((*stack)[9].toDouble(), 0.1);
    EXPECT_TRUE((*stack)[12].isNone());  // scale: its default, 1/sqrt(d)
    for (size_t k = 13; k < stack->size(); ++k) {
      EXPECT_TRUE((*stack)[k].isNone()) << schema.arguments()[k].name();
    }
  }
  // A schema without sequence offsets (as before them) is named in the error.
  const c10::FunctionSchema dense = torch::jit::parseSchema(
      "aten::_cudnn_attention_forward(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
      "bool compute_log_sumexp, float dropout_p=0.0) -> (Tensor, Tensor)");
  auto refused = ArgumentsByName(dense, Named(q, cu));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("has no argument cum_seq_q"),
            std::string::npos)
      << refused.status();
  // An argument the schema needs and the call does not name.
  auto missing = ArgumentsByName(torch::jit::parseSchema(kSchema211), {{"query", q}});
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("needs its argument key"),
            std::string::npos)
      << missing.status();
}

TEST(VarlenKernelChoiceTest, CudnnIsRefusedInOneLineWhereItCannotRun) {
  const BertOptions flash = testing::TinyOptions().attention(AttentionKind::kVarlen);
  const BertOptions cudnn = BertOptions(flash).varlen_kernel(VarlenKernel::kCudnn);
  const c10::Device gpu(c10::kCUDA, 0);
  // The CPU attends in buckets whatever the kernel: nothing to refuse.
  EXPECT_TRUE(CheckVarlenKernel(cudnn, c10::kCPU).ok());
  EXPECT_TRUE(CheckVarlenKernel(flash, gpu).ok());
  const InputPlan plan = InputPlan::For(cudnn, c10::kCPU, Precision::kBf16, at::kFloat);
  EXPECT_FALSE(plan.flash);
  EXPECT_FALSE(plan.cudnn);
  // LibTorch before 2.8 has no cuDNN attention over sequence offsets;
  // before 2.14 its backward writes past a buffer it sizes by the head
  // width (pytorch/pytorch#186142); 2.14 lacks the fixes of #194818:
  // refused in each case.
  if (!PBERT_TORCH_AT_LEAST(2, 15)) EXPECT_FALSE(CudnnVarlenAttentionAvailable());
  const absl::Status on_gpu = CheckVarlenKernel(cudnn, gpu);
  if (CudnnVarlenAttentionAvailable()) {
    const absl::Status wide = CheckVarlenKernel(
        BertOptions(cudnn).hidden_size(512).num_heads(2), gpu);  // heads of 256
    EXPECT_NE(std::string(wide.message()).find("heads of up to 128"), std::string::npos) << wide;
  } else {
    const std::string message(on_gpu.message());
    EXPECT_NE(message.find("model.varlen_kernel: cudnn needs "), std::string::npos) << message;
    EXPECT_NE(message.find("LibTorch 2.15 or later"), std::string::npos) << message;
    EXPECT_NE(message.find("pytorch/pytorch#186142"), std::string::npos) << message;
    EXPECT_NE(message.find("#194818"), std::string::npos) << message;
    EXPECT_NE(message.find("use model.varlen_kernel: flash"), std::string::npos) << message;
    EXPECT_NE(message.find(torch_compat::Version()), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// Where PyTorch's own varlen_attn chooses cuDNN (torch/nn/attention/
// varlen.py: cuDNN 9.18 or later on compute capability 9.x or 10.x), the
// GPU and cuDNN pass; elsewhere one line names what this GPU and process
// have and the way out.
TEST(VarlenKernelChoiceTest, CudnnRunsOnTheGpusAndCudnnPyTorchChoosesItOn) {
  EXPECT_TRUE(CheckCudnnVarlenRuntime(9, 0, 91800).ok());   // H100, H200 with cuDNN 9.18.0
  EXPECT_TRUE(CheckCudnnVarlenRuntime(10, 0, 92500).ok());  // B200 with cuDNN 9.25.0
  EXPECT_TRUE(CheckCudnnVarlenRuntime(10, 3, 91901).ok());
  struct Refused {
    int major, minor;
    int64_t cudnn;
    const char* names;
  };
  for (const Refused& r :
       {Refused{8, 0, 91900, "this GPU's is 8.0"}, Refused{8, 9, 91900, "this GPU's is 8.9"},
        Refused{12, 0, 92500, "this GPU's is 12.0"},
        Refused{9, 0, 91701, "this process has cuDNN 9.17.1"},
        Refused{10, 0, 90100, "this process has cuDNN 9.1.0"},
        Refused{9, 0, 8902, "this process has cuDNN 8.9.2"},
        Refused{9, 0, 0, "this process has no cuDNN loaded"}}) {
    const absl::Status refused = CheckCudnnVarlenRuntime(r.major, r.minor, r.cudnn);
    const std::string message(refused.message());
    EXPECT_FALSE(refused.ok()) << r.major << "." << r.minor << " " << r.cudnn;
    EXPECT_NE(message.find(r.names), std::string::npos) << message;
    EXPECT_NE(message.find("use model.varlen_kernel: flash"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // Without CUDA no cuDNN is loaded.
  if (!gpu::Built()) EXPECT_EQ(gpu::CudnnVersion(), 0);
}

}  // namespace
}  // namespace pbert::model
