// One BERT pretraining instance, as create_pretraining_data.py makes it and
// the MLPerf HDF5 files store it (without padding).
#pragma once

#include <cstdint>
#include <vector>

namespace pbert::data {

struct Instance {
  std::vector<int32_t> input_ids;         // [CLS] A [SEP] B [SEP], no padding
  std::vector<int32_t> segment_ids;       // 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int32_t> masked_positions;  // positions within input_ids, ascending
  std::vector<int32_t> masked_ids;        // the true ids at those positions
  int32_t next_sentence_label = 0;        // 0: B follows A, 1: B is random

  int length() const { return static_cast<int>(input_ids.size()); }
};

}  // namespace pbert::data
