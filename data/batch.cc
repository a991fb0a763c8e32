#include "data/batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pbert::data {

absl::StatusOr<PackedBatch> MakeBatch(const std::vector<std::vector<const Instance*>>& rows,
                                      const BatchShape& shape) {
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t S = shape.max_len;
  if (shape.fit_width) {
    int64_t longest = 1;
    for (const auto& row : rows) {
      int64_t tokens = 0;
      for (const Instance* instance : row) tokens += instance->length();
      longest = std::max(longest, tokens);
    }
    S = std::min<int64_t>(S, (longest + 7) / 8 * 8);
    S = std::max(S, longest);  // a max_len that is no multiple of 8
  }
  const int64_t D = shape.max_depth;
  if (B * S > std::numeric_limits<int32_t>::max()) {  // cu_seqlens is int32, as FlashAttention's
    return absl::InvalidArgumentError(absl::StrCat("a micro-batch of ", B, " rows of ", S,
                                                   " tokens is over 2^31 tokens"));
  }
  int64_t M = shape.max_predictions;
  int64_t needed = 1;
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t tokens = 0, predictions = 0;
    for (const Instance* instance : rows[r]) {
      tokens += instance->length();
      predictions += static_cast<int64_t>(instance->masked_positions.size());
    }
    if (tokens > S || static_cast<int64_t>(rows[r].size()) > D) {
      return absl::InvalidArgumentError(absl::StrCat("row ", r, " holds ", rows[r].size(),
                                                     " sequences and ", tokens,
                                                     " tokens; the batch allows ", D, " and ", S));
    }
    if (shape.max_predictions > 0 && predictions > shape.max_predictions) {
      return absl::InvalidArgumentError(absl::StrCat("row ", r, " has ", predictions,
                                                     " masked tokens, more than the ", M,
                                                     " MLM slots per row"));
    }
    needed = std::max(needed, predictions);
  }
  if (M == 0) M = needed;

  auto zeros = [](int64_t a, int64_t b) { return at::zeros({a, b}, at::kLong); };
  PackedBatch batch;
  for (at::Tensor* t : {&batch.input_ids, &batch.position_ids, &batch.token_type_ids,
                        &batch.sequence_ids}) {
    *t = zeros(B, S);
  }
  for (at::Tensor* t : {&batch.mlm_positions, &batch.mlm_labels, &batch.mlm_sequence}) {
    *t = zeros(B, M);
  }
  for (at::Tensor* t : {&batch.cls_positions, &batch.nsp_labels, &batch.nsp_valid,
                        &batch.cls_token}) {
    *t = zeros(B, D);
  }
  std::vector<int64_t> used, token_index, mlm_token;
  std::vector<int32_t> cu_seqlens = {0};
  auto ids = batch.input_ids.accessor<int64_t, 2>();
  auto pos = batch.position_ids.accessor<int64_t, 2>();
  auto seg = batch.token_type_ids.accessor<int64_t, 2>();
  auto sid = batch.sequence_ids.accessor<int64_t, 2>();
  auto mpos = batch.mlm_positions.accessor<int64_t, 2>();
  auto mlab = batch.mlm_labels.accessor<int64_t, 2>();
  auto mseq = batch.mlm_sequence.accessor<int64_t, 2>();
  auto cls = batch.cls_positions.accessor<int64_t, 2>();
  auto nsp = batch.nsp_labels.accessor<int64_t, 2>();
  auto valid = batch.nsp_valid.accessor<int64_t, 2>();
  auto cls_token = batch.cls_token.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    int64_t offset = 0, slot = 0;
    for (size_t k = 0; k < rows[b].size(); ++k) {
      const Instance& in = *rows[b][k];
      const int64_t sequence = static_cast<int64_t>(k) + 1;
      const int64_t first = batch.tokens;  // this sequence's first token among the T
      for (int i = 0; i < in.length(); ++i) {
        ids[b][offset + i] = in.input_ids[i];
        pos[b][offset + i] = i;
        seg[b][offset + i] = in.segment_ids[i];
        sid[b][offset + i] = sequence;
        token_index.push_back(b * S + offset + i);
      }
      for (size_t m = 0; m < in.masked_positions.size(); ++m, ++slot) {
        used.push_back(b * M + slot);
        mlm_token.push_back(first + in.masked_positions[m]);
        mpos[b][slot] = offset + in.masked_positions[m];
        mlab[b][slot] = in.masked_ids[m];
        mseq[b][slot] = sequence;
      }
      batch.masked_sequences += in.masked_positions.empty() ? 0 : 1;
      cls[b][k] = offset;
      cls_token[b][k] = first;
      nsp[b][k] = in.next_sentence_label;
      valid[b][k] = 1;
      batch.sequences.push_back({b * S + offset, first, in.length()});
      batch.max_seqlen = std::max<int64_t>(batch.max_seqlen, in.length());
      offset += in.length();
      batch.tokens += in.length();
      cu_seqlens.push_back(static_cast<int32_t>(batch.tokens));
    }
  }
  batch.mlm_used = at::tensor(used, at::kLong);
  batch.token_index = at::tensor(token_index, at::kLong);
  batch.mlm_token = at::tensor(mlm_token, at::kLong);
  batch.cu_seqlens = at::tensor(cu_seqlens, at::kInt);
  return batch;
}

}  // namespace pbert::data
