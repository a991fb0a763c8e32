// Random pretraining instances and tiny models for the model tests.
#pragma once

#include <vector>

#include "data/batch.h"
#include "data/instance.h"
#include "model/bert.h"
#include "tests/data/random_instances.h"

namespace pbert::model::testing {

inline BertOptions TinyOptions() {
  return BertOptions()
      .vocab_size(97)
      .hidden_size(32)
      .num_layers(2)
      .num_heads(4)
      .intermediate_size(64)
      .max_position_embeddings(64)
      .hidden_dropout(0.0)
      .attention_dropout(0.0);
}

using pbert::testing::RandomInstances;

// Rows of at most `depth` sequences and `max_len` tokens, in order.
inline std::vector<std::vector<const data::Instance*>> PackInOrder(
    const std::vector<data::Instance>& instances, int depth, int max_len) {
  std::vector<std::vector<const data::Instance*>> rows(1);
  int used = 0;
  for (const auto& in : instances) {
    if (static_cast<int>(rows.back().size()) == depth || used + in.length() > max_len) {
      rows.emplace_back();
      used = 0;
    }
    rows.back().push_back(&in);
    used += in.length();
  }
  return rows;
}

}  // namespace pbert::model::testing
