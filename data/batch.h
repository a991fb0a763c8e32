// The tensors of one packed micro-batch (docs/model.md, Micro-batch tensors). An unpacked batch
// is the special case of one sequence per row, so one code path serves both.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "absl/status/statusor.h"
#include "data/instance.h"

namespace pbert::data {

// Where one sequence of a batch lies: among the flattened [B*S] row
// positions, and among the batch's T real tokens end to end.
struct SequenceSpan {
  int64_t row_start = 0;    // index into the flattened [B*S] rows
  int64_t token_start = 0;  // index into the T real tokens
  int64_t length = 0;
};

struct PackedBatch {
  at::Tensor input_ids;       // [B,S] int64, 0 = padding
  at::Tensor position_ids;    // [B,S] position inside its own sequence
  at::Tensor token_type_ids;  // [B,S] segment A/B
  at::Tensor sequence_ids;    // [B,S] 1..D for the sequence of each token, 0 for padding
  at::Tensor mlm_positions;   // [B,M] masked positions in the row
  at::Tensor mlm_labels;      // [B,M] their true ids
  at::Tensor mlm_sequence;    // [B,M] 1..D for the sequence of each slot, 0 = unused
  at::Tensor cls_positions;   // [B,D] where each sequence's [CLS] is
  at::Tensor nsp_labels;      // [B,D] its next-sentence label
  at::Tensor nsp_valid;       // [B,D] 1 where the slot holds a sequence
  // [K] the MLM slots that hold a masked token, as indices into the
  // flattened [B*M] slots, in order: the MLM head runs on these K only.
  at::Tensor mlm_used;
  // The batch without its padding (the varlen attention layout): the T real
  // tokens end to end, sequence after sequence, row after row.
  at::Tensor token_index;  // [T] where each real token lies in the flattened [B*S] rows
  at::Tensor cu_seqlens;   // [N+1] int32: where each of the N sequences starts among the T, then T
  at::Tensor mlm_token;    // [K] the token (index into the T) of each used MLM slot, in order
  at::Tensor cls_token;    // [B,D] the token of each sequence slot's [CLS]; 0 for unused slots
  // Computed on the host as the batch was laid out: the real tokens (T), the longest sequence, the
  // sequences with at least one masked token, each sequence. With mlm_used's length (K, the masked
  // tokens), what a loss is divided by is known without reading a device.
  int64_t tokens = 0;
  int64_t max_seqlen = 0;
  int64_t masked_sequences = 0;
  std::vector<SequenceSpan> sequences;
  // Each sequence's record in the loader's source, in `sequences`' order:
  // what a fine-tuning task finds its targets by (the loader sets it).
  std::vector<int64_t> records;

  int64_t rows() const { return input_ids.size(0); }
};

struct BatchShape {
  int max_len = 512;        // S
  int max_depth = 8;        // D: sequence slots per row
  int max_predictions = 0;  // M: MLM slots per row; 0 = the most any row needs
  // Dynamic padding: S is the longest row of the micro-batch rounded up to
  // a multiple of 8 (at most max_len), as Hugging Face's collators pad.
  bool fit_width = false;
};

// Lays out `rows` (each a list of instances sharing a row) as a packed
// micro-batch. Fails if a row exceeds S tokens or D sequences, or M slots
// when M is given.
absl::StatusOr<PackedBatch> MakeBatch(const std::vector<std::vector<const Instance*>>& rows,
                                      const BatchShape& shape);

}  // namespace pbert::data
