#include "model/attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>

#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"
#include "model/dropout.h"

namespace pbert::model {
namespace {

// A layout's unit of attention: where a sequence starts among the
// flattened tokens it indexes, and its length.
struct Span {
  int64_t start = 0, length = 0;
};

// The batch's sequences as spans of the [B*S] rows (`rows`) or of the T
// tokens; `whole_rows` joins each row's sequences into one.
std::vector<Span> Spans(const data::PackedBatch& batch, bool rows, bool whole_rows) {
  const int64_t S = batch.input_ids.size(1);
  std::vector<Span> spans;
  int64_t row = -1;
  for (const data::SequenceSpan& s : batch.sequences) {
    const int64_t start = rows ? s.row_start : s.token_start;
    if (whole_rows && s.row_start / S == row) {
      spans.back().length += s.length;  // the row's sequences lie end to end
      continue;
    }
    spans.push_back({start, s.length});
    row = s.row_start / S;
  }
  return spans;
}

// Buckets of spans of similar length (L a multiple of `granularity`) over
// `count` flattened tokens; index `count` is the padding slot.
std::vector<AttentionLayout::Bucket> Buckets(const std::vector<Span>& spans, int64_t count,
                                             int64_t longest, const c10::Device& device,
                                             at::ScalarType dtype, int64_t granularity = 32) {
  std::map<int64_t, std::vector<Span>> by_length;
  for (const Span& s : spans) {
    const int64_t rounded = (s.length + granularity - 1) / granularity * granularity;
    by_length[std::min(rounded, std::max(longest, s.length))].push_back(s);
  }
  std::vector<AttentionLayout::Bucket> buckets;
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [L, members] : by_length) {
    const int64_t n = static_cast<int64_t>(members.size());
    at::Tensor tokens = at::full({n, L}, count, at::kLong);
    at::Tensor key_mask = at::full({n, 1, 1, L}, -inf, at::TensorOptions().dtype(dtype));
    auto t = tokens.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < members[i].length; ++j) t[i][j] = members[i].start + j;
      key_mask[i].narrow(-1, 0, members[i].length).fill_(0);
    }
    buckets.push_back({L, tokens.reshape({-1}).to(device), key_mask.to(device)});
  }
  return buckets;
}

// FlashAttention's variable-length kernel applies: a GPU of sm_80 or later,
// fp16 or bf16 activations (autocast), a head width it takes, and a
// LibTorch that has the kernel's 2.6 interface.
bool UseFlashAttention(const c10::Device& device, int64_t head_dim) {
#ifdef PBERT_HAS_FLASH_VARLEN
  if (!device.is_cuda() || head_dim % 8 != 0 || head_dim > 256) return false;
  if (!torch_compat::AutocastEnabled(c10::DeviceType::CUDA)) return false;
  const at::ScalarType dtype = torch_compat::AutocastDtype(c10::DeviceType::CUDA);
  if (dtype != at::kHalf && dtype != at::kBFloat16) return false;
  auto facts = gpu::Describe(device.index());
  return facts.ok() && facts->major >= 8;
#else
  (void)device;
  (void)head_dim;
  return false;
#endif
}

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
                           int64_t heads, const std::vector<AttentionLayout::Bucket>& buckets,
                           double dropout_p) {
  const int64_t rows = q.size(0), hidden = q.size(1), d = hidden / heads;
  at::Tensor qkv = at::cat({at::cat({q, k, v}, -1), at::zeros({1, 3 * hidden}, q.options())});
  std::vector<at::Tensor> contexts, positions;
  for (const AttentionLayout::Bucket& bucket : buckets) {
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

}  // namespace

AttentionKind ResolveAttention(AttentionKind kind) {
  return kind == AttentionKind::kAuto ? AttentionKind::kVarlen : kind;
}

at::Tensor BlockDiagonalMask(const at::Tensor& sequence_ids, at::ScalarType dtype) {
  auto same = sequence_ids.unsqueeze(2) == sequence_ids.unsqueeze(1);  // [B,S,S]
  auto mask = at::zeros(same.sizes(), sequence_ids.options().dtype(dtype));
  mask.masked_fill_(same.logical_not(), -std::numeric_limits<double>::infinity());
  return mask.unsqueeze(1);
}

AttentionLayout MakeLayout(const data::PackedBatch& batch, AttentionKind kind,
                           at::ScalarType dtype, int64_t head_dim, bool whole_rows) {
  AttentionLayout layout;
  layout.kind = kind;
  const c10::Device device = batch.input_ids.device();
  const int64_t S = batch.input_ids.size(1), rows = batch.rows() * S;
  switch (kind) {
    case AttentionKind::kDense: {
      // Without the block mask, a row's real tokens are one "sequence".
      const at::Tensor ids = whole_rows ? batch.sequence_ids.gt(0).to(batch.sequence_ids.scalar_type())
                                        : batch.sequence_ids;
      layout.mask = BlockDiagonalMask(ids, dtype);
      break;
    }
    case AttentionKind::kBlocked:
      layout.buckets = Buckets(Spans(batch, /*rows=*/true, whole_rows), rows, S, device, dtype);
      break;
    case AttentionKind::kVarlen:
    case AttentionKind::kAuto: {
      layout.kind = AttentionKind::kVarlen;
      const std::vector<Span> spans = Spans(batch, /*rows=*/false, whole_rows);
      layout.flash = UseFlashAttention(device, head_dim);
      if (!layout.flash) {
        layout.buckets = Buckets(spans, batch.tokens, S, device, dtype);
      } else if (!whole_rows) {
        layout.cu_seqlens = batch.cu_seqlens;
        layout.max_seqlen = batch.max_seqlen;
      } else {
        std::vector<int32_t> cu = {0};
        for (const Span& s : spans) {
          cu.push_back(static_cast<int32_t>(s.start + s.length));
          layout.max_seqlen = std::max(layout.max_seqlen, s.length);
        }
        layout.cu_seqlens = at::tensor(cu, at::kInt).to(device);
      }
      break;
    }
  }
  return layout;
}

at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                  const AttentionLayout& layout, double dropout_p) {
  switch (layout.kind) {
    case AttentionKind::kDense: {
      const int64_t B = q.size(0), S = q.size(1), hidden = q.size(2), d = hidden / heads;
      auto split = [&](const at::Tensor& x) { return x.view({B, S, heads, d}).transpose(1, 2); };
      return AttendBlock(split(q), split(k), split(v), layout.mask, dropout_p)
          .transpose(1, 2)
          .reshape({B, S, hidden});
    }
    case AttentionKind::kBlocked: {
      const int64_t B = q.size(0), S = q.size(1), hidden = q.size(2);
      auto flat = [&](const at::Tensor& x) { return x.reshape({B * S, hidden}); };
      return AttendInBuckets(flat(q), flat(k), flat(v), heads, layout.buckets, dropout_p)
          .view({B, S, hidden});
    }
    case AttentionKind::kVarlen:
    case AttentionKind::kAuto:
      break;
  }
  if (!layout.flash) return AttendInBuckets(q, k, v, heads, layout.buckets, dropout_p);
#ifdef PBERT_HAS_FLASH_VARLEN
  const int64_t T = q.size(0), hidden = q.size(1), d = hidden / heads;
  auto split = [&](const at::Tensor& x) { return x.view({T, heads, d}); };
  return torch_compat::FlashAttentionVarlen(split(q), split(k), split(v), layout.cu_seqlens,
                                            layout.max_seqlen, dropout_p)
      .reshape({T, hidden});
#else
  TORCH_CHECK(false, "FlashAttention needs LibTorch 2.6 or later");
#endif
}

}  // namespace pbert::model
