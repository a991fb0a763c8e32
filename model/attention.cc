#include "model/attention.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/torch_compat.h"
#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"
#include "model/dropout.h"
#include "model/op_arguments.h"

namespace pbert::model {
namespace {

// Scaled dot-product attention of [n,heads,L,d] tensors with an additive
// mask. Without dropout, LibTorch's fused path; with it on the CPU, the
// same math written out, so that the probabilities get this project's
// dropout (model/dropout.h).
at::Tensor AttendBlock(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& mask, double dropout_p) {
  if (dropout_p == 0.0 || !q.device().is_cpu()) {
    return torch_compat::ScaledDotProductAttention(q, k, v, mask, dropout_p);
  }
  const double d = static_cast<double>(q.size(-1));
  at::Tensor scores = at::matmul(q.mul(1.0 / std::sqrt(d)), k.transpose(-2, -1));
  scores.add_(mask);
  return at::matmul(Dropout(at::softmax(scores, -1), dropout_p, /*training=*/true), v);
}

// Attention within each bucket's sequences over `rows` flattened tokens
// q, k, v [rows, hidden]: gathered once per bucket (a zero row appended for
// the padding slots), attended, and scattered back.
at::Tensor AttendInBuckets(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t heads, const std::vector<AttentionBucket>& buckets,
                           double dropout_p) {
  const int64_t rows = q.size(0), hidden = q.size(1), d = hidden / heads;
  at::Tensor qkv = at::cat({at::cat({q, k, v}, -1), at::zeros({1, 3 * hidden}, q.options())});
  std::vector<at::Tensor> contexts, positions;
  for (const AttentionBucket& bucket : buckets) {
    const int64_t L = bucket.length, n = bucket.tokens.numel() / L;
    auto parts = qkv.index_select(0, bucket.tokens).view({n, L, 3, heads, d}).unbind(2);
    auto split = [&](const at::Tensor& x) { return x.transpose(1, 2); };  // [n,heads,L,d]
    contexts.push_back(
        AttendBlock(split(parts[0]), split(parts[1]), split(parts[2]), bucket.key_mask, dropout_p)
            .transpose(1, 2)
            .reshape({n * L, hidden}));
    positions.push_back(bucket.tokens);
  }
  at::Tensor out = at::zeros({rows + 1, hidden}, q.options());
  if (!contexts.empty()) out = out.index_copy(0, at::cat(positions), at::cat(contexts));
  return out.narrow(0, 0, rows);
}

// cuDNN's fused attention over sequence offsets, where this LibTorch
// registered it with them (2.8 and later; a schema that 2.12 extends with
// defaulted arguments, so the call is made by argument name).
using OptionalOperator = decltype(std::declval<c10::Dispatcher&>().findSchema(
    std::declval<const c10::OperatorName&>()));

const OptionalOperator& CudnnVarlenOperator() {
  static const OptionalOperator op = []() -> OptionalOperator {
    auto& dispatcher = c10::Dispatcher::singleton();
    auto forward = dispatcher.findSchema({"aten::_cudnn_attention_forward", ""});
    if (!forward || !dispatcher.findSchema({"aten::_cudnn_attention_backward", ""})) return {};
    const auto& arguments = forward->schema().arguments();
    const bool offsets = std::any_of(arguments.begin(), arguments.end(),
                                     [](const c10::Argument& a) { return a.name() == "cum_seq_q"; });
    if (!offsets) return {};
    return forward;
  }();
  return op;
}

// softmax(q k^T / sqrt(d)) v within each sequence of q, k, v [T, heads, d]
// whose boundaries are `cu_seqlens`, through cuDNN (differentiable: the
// operator's backward is _cudnn_attention_backward; dropout from the CUDA
// generator).
at::Tensor CudnnAttentionVarlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& cu_seqlens, int64_t max_seqlen,
                                double dropout_p) {
  const auto& op = CudnnVarlenOperator();
  TORCH_CHECK(CudnnVarlenAttentionAvailable(),
              "model.varlen_kernel cudnn: this LibTorch has no cuDNN attention over sequence "
              "offsets that trains (CheckVarlenKernel refuses such runs)");
  const bool backward =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  auto stack = ArgumentsByName(op->schema(), {{"query", q},
                                              {"key", k},
                                              {"value", v},
                                              {"attn_bias", c10::IValue()},
                                              {"cum_seq_q", cu_seqlens},
                                              {"cum_seq_k", cu_seqlens},
                                              {"max_q", max_seqlen},
                                              {"max_k", max_seqlen},
                                              {"compute_log_sumexp", backward},
                                              {"dropout_p", dropout_p},
                                              {"is_causal", false},
                                              {"return_debug_mask", false}});
  TORCH_CHECK(stack.ok(), std::string(stack.status().message()));
  op->callBoxed(&*stack);
  return (*stack)[0].toTensor();
}

// Each layout's attention, by its type.
struct AttendIn {
  const at::Tensor &q, &k, &v;
  int64_t heads;
  double dropout_p;

  at::Tensor operator()(const DenseMask& dense) const {
    const int64_t B = q.size(0), S = q.size(1), hidden = q.size(2), d = hidden / heads;
    auto split = [&](const at::Tensor& x) { return x.view({B, S, heads, d}).transpose(1, 2); };
    return AttendBlock(split(q), split(k), split(v), dense.mask, dropout_p)
        .transpose(1, 2)
        .reshape({B, S, hidden});
  }
  at::Tensor operator()(const BlockedBuckets& blocked) const {
    const int64_t B = q.size(0), S = q.size(1), hidden = q.size(2);
    auto flat = [&](const at::Tensor& x) { return x.reshape({B * S, hidden}); };
    return AttendInBuckets(flat(q), flat(k), flat(v), heads, blocked.buckets, dropout_p)
        .view({B, S, hidden});
  }
  at::Tensor operator()(const VarlenBuckets& varlen) const {
    return AttendInBuckets(q, k, v, heads, varlen.buckets, dropout_p);
  }
  at::Tensor operator()(const VarlenBoundaries& varlen) const {
    const int64_t T = q.size(0), hidden = q.size(1), d = hidden / heads;
    auto split = [&](const at::Tensor& x) { return x.view({T, heads, d}); };
    if (varlen.cudnn) {
      // Whole [T, heads, d] tensors: LibTorch's cuDNN path over sequence
      // offsets may place each sequence at offset x heads x d, which the
      // strided views of the one QKV product ([T, 3h] rows) are not.
      auto whole = [&](const at::Tensor& x) { return split(x).contiguous(); };
      return CudnnAttentionVarlen(whole(q), whole(k), whole(v), varlen.cu_seqlens,
                                  varlen.max_seqlen, dropout_p)
          .reshape({T, hidden});
    }
#ifdef PBERT_HAS_FLASH_VARLEN
    return torch_compat::FlashAttentionVarlen(split(q), split(k), split(v), varlen.cu_seqlens,
                                              varlen.max_seqlen, dropout_p)
        .reshape({T, hidden});
#else
    TORCH_CHECK(false, "FlashAttention needs LibTorch 2.6 or later");
#endif
  }
};

}  // namespace

AttentionKind ResolveAttention(AttentionKind kind) {
  return kind == AttentionKind::kAuto ? AttentionKind::kVarlen : kind;
}

// The first LibTorch that carries the fixes of cuDNN's attention over
// sequence offsets known so far, by PyTorch's sources, tracker and release
// calendar (not a run): the backward's buffer sized by the head width
// (pytorch/pytorch#186142, June 2026, and the varlen fixes of #172108,
// after 2.13's branch cut of 8-10 June), then six defects found by fuzzing
// the path, among them silent wrong results (#194818, 25 August 2026,
// after 2.14's branch cut in the week of 10 August, #193034). The
// operator is there from 2.8; until 2.15 it is refused (CheckVarlenKernel).
constexpr bool kCudnnVarlenTrains = PBERT_TORCH_AT_LEAST(2, 15);
constexpr char kCudnnVarlenFirst[] = "2.15";

bool CudnnVarlenAttentionAvailable() {
  return kCudnnVarlenTrains && CudnnVarlenOperator().has_value();
}

absl::Status CheckCudnnVarlenRuntime(int major, int minor, int64_t cudnn_version) {
  // torch/nn/attention/varlen.py, _should_use_cudnn: cuDNN 9.18 or later on
  // SM90 or SM100, where PyTorch's own varlen_attn prefers cuDNN.
  constexpr int64_t kFirstCudnn = 91800;
  if (major != 9 && major != 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.varlen_kernel: cudnn runs on GPUs of compute capability 9.x or 10.x (Hopper, "
        "Blackwell), where PyTorch's varlen attention chooses cuDNN; this GPU's is ",
        major, ".", minor, ": use model.varlen_kernel: flash"));
  }
  if (cudnn_version < kFirstCudnn) {
    // cuDNN 9 numbers its versions major x 10000 + minor x 100 + patch,
    // cuDNN 8 and before major x 1000 + minor x 100 + patch.
    const int64_t major_unit = cudnn_version >= 90000 ? 10000 : 1000;
    return absl::InvalidArgumentError(absl::StrCat(
        "model.varlen_kernel: cudnn needs cuDNN 9.18 or later, as PyTorch's varlen attention "
        "does; this process has ",
        cudnn_version == 0
            ? std::string("no cuDNN loaded")
            : absl::StrCat("cuDNN ", cudnn_version / major_unit, ".",
                           cudnn_version % major_unit / 100, ".", cudnn_version % 100),
        ": use model.varlen_kernel: flash"));
  }
  return absl::OkStatus();
}

absl::Status CheckVarlenKernel(const BertOptions& options, const c10::Device& device) {
  if (options.varlen_kernel() != VarlenKernel::kCudnn || !device.is_cuda()) {
    return absl::OkStatus();
  }
  if (!CudnnVarlenAttentionAvailable()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.varlen_kernel: cudnn needs LibTorch ", kCudnnVarlenFirst,
        " or later: before it, cuDNN's attention over sequence offsets is missing (before 2.8), "
        "its backward writes past a buffer it sizes by the head width (pytorch/pytorch#186142) "
        "or its fixes of silent wrong results are missing (#194818); this build has ",
        torch_compat::Version(), ": use model.varlen_kernel: flash"));
  }
  const int64_t head = options.hidden_size() / options.num_heads();
  if (head > 128 || head % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.varlen_kernel: cudnn takes heads of up to 128 values, a multiple of "
                     "8; this model's are ",
                     head, " wide: use model.varlen_kernel: flash"));
  }
  auto facts = gpu::Describe(device.index());
  if (!facts.ok()) return facts.status();
  return CheckCudnnVarlenRuntime(facts->major, facts->minor, gpu::CudnnVersion());
}

at::Tensor BlockDiagonalMask(const at::Tensor& sequence_ids, at::ScalarType dtype) {
  auto same = sequence_ids.unsqueeze(2) == sequence_ids.unsqueeze(1);  // [B,S,S]
  auto mask = at::zeros(same.sizes(), sequence_ids.options().dtype(dtype));
  mask.masked_fill_(same.logical_not(), -std::numeric_limits<double>::infinity());
  return mask.unsqueeze(1);
}

at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                  const AttentionLayout& layout, double dropout_p) {
  return std::visit(AttendIn{q, k, v, heads, dropout_p}, layout);
}

}  // namespace pbert::model
