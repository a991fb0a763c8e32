#include "data/batch.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pbert::data {

namespace {

// Every tensor of `batch`, for moving them all alike.
template <class Batch, class F>
void ForEachTensor(Batch& batch, F f) {
  for (auto* t : {&batch.input_ids, &batch.position_ids, &batch.token_type_ids,
                  &batch.sequence_ids, &batch.mlm_positions, &batch.mlm_labels,
                  &batch.mlm_sequence, &batch.cls_positions, &batch.nsp_labels, &batch.nsp_valid,
                  &batch.mlm_used}) {
    f(*t);
  }
}

}  // namespace

PackedBatch PackedBatch::To(const c10::Device& device, bool non_blocking) const {
  PackedBatch moved = *this;
  ForEachTensor(moved, [&](at::Tensor& t) {
    if (t.defined()) t = t.to(device, t.scalar_type(), non_blocking);
  });
  return moved;
}

void PackedBatch::PinMemory() {
  ForEachTensor(*this, [](at::Tensor& t) {
    if (t.defined()) t = t.pin_memory();
  });
}

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
  PackedBatch batch{zeros(B, S), zeros(B, S), zeros(B, S), zeros(B, S), zeros(B, M),
                    zeros(B, M), zeros(B, M), zeros(B, D), zeros(B, D), zeros(B, D), {}, 0};
  std::vector<int64_t> used;
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
  for (int64_t b = 0; b < B; ++b) {
    int64_t offset = 0, slot = 0;
    for (size_t k = 0; k < rows[b].size(); ++k) {
      const Instance& in = *rows[b][k];
      const int64_t sequence = static_cast<int64_t>(k) + 1;
      for (int i = 0; i < in.length(); ++i) {
        ids[b][offset + i] = in.input_ids[i];
        pos[b][offset + i] = i;
        seg[b][offset + i] = in.segment_ids[i];
        sid[b][offset + i] = sequence;
      }
      for (size_t m = 0; m < in.masked_positions.size(); ++m, ++slot) {
        used.push_back(b * M + slot);
        mpos[b][slot] = offset + in.masked_positions[m];
        mlab[b][slot] = in.masked_ids[m];
        mseq[b][slot] = sequence;
      }
      cls[b][k] = offset;
      nsp[b][k] = in.next_sentence_label;
      valid[b][k] = 1;
      offset += in.length();
      batch.tokens += in.length();
    }
  }
  batch.mlm_used = at::tensor(used, at::kLong);
  return batch;
}

}  // namespace pbert::data
