#include "model/attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>

#include "common/torch_compat_ops.h"
#include "model/dropout.h"

namespace pbert::model {

at::Tensor BlockDiagonalMask(const at::Tensor& sequence_ids, at::ScalarType dtype) {
  auto same = sequence_ids.unsqueeze(2) == sequence_ids.unsqueeze(1);  // [B,S,S]
  auto mask = at::zeros(same.sizes(), sequence_ids.options().dtype(dtype));
  mask.masked_fill_(same.logical_not(), -std::numeric_limits<double>::infinity());
  return mask.unsqueeze(1);
}

AttentionLayout DenseLayout(const at::Tensor& sequence_ids, at::ScalarType dtype) {
  AttentionLayout layout;
  layout.mask = BlockDiagonalMask(sequence_ids, dtype);
  return layout;
}

AttentionLayout BlockedLayout(const at::Tensor& sequence_ids, at::ScalarType dtype,
                              int64_t granularity) {
  at::Tensor ids = sequence_ids.to(at::kCPU).contiguous();
  const int64_t B = ids.size(0), S = ids.size(1), padding = B * S;
  auto a = ids.accessor<int64_t, 2>();
  // Each sequence as (first flat token, length), bucketed by rounded length.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_length;
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0;
    while (start < S) {
      int64_t end = start + 1;
      while (end < S && a[b][end] == a[b][start]) ++end;
      if (a[b][start] != 0) {
        const int64_t length = end - start;
        const int64_t rounded = (length + granularity - 1) / granularity * granularity;
        by_length[std::min(rounded, S)].push_back({b * S + start, length});
      }
      start = end;
    }
  }
  AttentionLayout layout;
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [L, sequences] : by_length) {
    const int64_t n = static_cast<int64_t>(sequences.size());
    at::Tensor tokens = at::full({n, L}, padding, at::kLong);
    at::Tensor key_mask = at::full({n, 1, 1, L}, -inf, at::TensorOptions().dtype(dtype));
    auto t = tokens.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      auto [first, length] = sequences[i];
      for (int64_t j = 0; j < length; ++j) t[i][j] = first + j;
      key_mask[i].narrow(-1, 0, length).fill_(0);
    }
    layout.buckets.push_back({L, tokens.reshape({-1}).to(sequence_ids.device()),
                              key_mask.to(sequence_ids.device())});
  }
  return layout;
}

at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                  const AttentionLayout& layout, double dropout_p) {
  const int64_t B = q.size(0), S = q.size(1), hidden = q.size(2), d = hidden / heads;
  // [n,heads,L,d] in, [n,heads,L,d] out; the mask is additive. Without
  // dropout, LibTorch's fused path; with it, the same math written out, so
  // that the probabilities get this project's dropout (model/dropout.h).
  auto attend = [&](const at::Tensor& qh, const at::Tensor& kh, const at::Tensor& vh,
                    const at::Tensor& mask) {
    if (dropout_p == 0.0 || !qh.device().is_cpu()) {
      return torch_compat::ScaledDotProductAttention(qh, kh, vh, mask, dropout_p);
    }
    at::Tensor scores = at::matmul(qh.mul(1.0 / std::sqrt(static_cast<double>(d))),
                                   kh.transpose(-2, -1));
    scores.add_(mask);
    return at::matmul(Dropout(at::softmax(scores, -1), dropout_p, /*training=*/true), vh);
  };
  if (!layout.blocked()) {
    auto split = [&](const at::Tensor& x) { return x.view({B, S, heads, d}).transpose(1, 2); };
    return attend(split(q), split(k), split(v), layout.mask)
        .transpose(1, 2)
        .reshape({B, S, hidden});
  }
  // q, k and v with a zero row appended for the padding slots, gathered
  // once per bucket.
  at::Tensor qkv = at::cat({at::cat({q, k, v}, -1).reshape({B * S, 3 * hidden}),
                            at::zeros({1, 3 * hidden}, q.options())});
  std::vector<at::Tensor> contexts, positions;
  for (const AttentionLayout::Bucket& bucket : layout.buckets) {
    const int64_t L = bucket.length, n = bucket.tokens.numel() / L;
    auto parts = qkv.index_select(0, bucket.tokens).view({n, L, 3, heads, d}).unbind(2);
    auto split = [&](const at::Tensor& x) { return x.transpose(1, 2); };  // [n,heads,L,d]
    contexts.push_back(attend(split(parts[0]), split(parts[1]), split(parts[2]), bucket.key_mask)
                           .transpose(1, 2)
                           .reshape({n * L, hidden}));
    positions.push_back(bucket.tokens);
  }
  at::Tensor out = at::zeros({B * S + 1, hidden}, q.options())
                       .index_copy(0, at::cat(positions), at::cat(contexts));
  return out.narrow(0, 0, B * S).view({B, S, hidden});
}

}  // namespace pbert::model
