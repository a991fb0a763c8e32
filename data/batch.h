// The tensors of one packed micro-batch (docs/model.md, Micro-batch tensors). An unpacked batch
// is the special case of one sequence per row, so one code path serves both.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "absl/status/statusor.h"
#include "data/instance.h"

namespace pbert::data {

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
  // Real (non-padding) tokens, counted on the host as the batch was laid out.
  int64_t tokens = 0;

  int64_t rows() const { return input_ids.size(0); }

  // This batch with every tensor on `device` (the host fields copied): the
  // one call that moves a batch. `non_blocking` copies from pinned host
  // memory (PinMemory) without waiting. On the device it is already on,
  // the tensors are shared, not copied.
  PackedBatch To(const c10::Device& device, bool non_blocking = false) const;
  // Moves the tensors into page-locked host memory, from which a GPU copies
  // asynchronously (a CUDA LibTorch only; the loader does it for GPU runs).
  void PinMemory();
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
