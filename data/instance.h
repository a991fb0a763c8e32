// One BERT pretraining instance, as create_pretraining_data.py makes it and
// the MLPerf HDF5 files store it (without padding), and the one check that
// every reader applies before an instance is used.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace pbert::data {

struct Instance {
  std::vector<int32_t> input_ids;         // [CLS] A [SEP] B [SEP], no padding
  std::vector<int32_t> segment_ids;       // 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int32_t> masked_positions;  // positions within input_ids, ascending
  std::vector<int32_t> masked_ids;        // the true ids at those positions
  int32_t next_sentence_label = 0;        // 0: B follows A, 1: B is random

  int length() const { return static_cast<int>(input_ids.size()); }
};

// The longest sequence any reader, store or pack index holds: lengths are
// stored as 16-bit counts.
inline constexpr uint32_t kMaxSequenceLength = 65535;

// What a collection of instances promises about every one of them.
struct InstanceLimits {
  uint32_t vocab_size = 0;
  uint32_t max_len = 0;
  uint32_t max_predictions = 0;
};

// OK iff `instance` fits `limits`: length 1..max_len, segments 0s then 1s,
// masked positions strictly increasing inside the sequence and at most
// max_predictions of them, ids below vocab_size, label 0 or 1. The message
// says what is wrong (the caller names the record).
absl::Status ValidateInstance(const Instance& instance, const InstanceLimits& limits);

}  // namespace pbert::data
