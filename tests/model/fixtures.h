// Random pretraining instances and tiny models for the model tests.
#pragma once

#include <random>
#include <vector>

#include "data/batch.h"
#include "data/instance.h"
#include "model/bert.h"

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

// `count` instances of lengths in [min_len, max_len]: [CLS]=1 ... [SEP]=2,
// segment B from the middle, ~15% masked (some with none), random NSP.
inline std::vector<data::Instance> RandomInstances(int count, int min_len, int max_len,
                                                   int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(min_len, max_len), token(5, vocab - 1), coin(0, 1);
  std::bernoulli_distribution mask(0.15);
  std::vector<data::Instance> out(count);
  for (int n = 0; n < count; ++n) {
    data::Instance& in = out[n];
    int len = length(rng);
    for (int i = 0; i < len; ++i) {
      in.input_ids.push_back(i == 0 ? 1 : (i == len - 1 ? 2 : token(rng)));
      in.segment_ids.push_back(i < len / 2 ? 0 : 1);
      if (i > 0 && i < len - 1 && n % 5 != 4 && mask(rng)) {
        in.masked_positions.push_back(i);
        in.masked_ids.push_back(token(rng));
      }
    }
    in.next_sentence_label = coin(rng);
  }
  return out;
}

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
