// Tiny models for the model tests.
#pragma once

#include "model/bert_options.h"

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
      .attention_dropout(0.0)
      .vocab_padding(64);  // 97 rows padded to 128: every test crosses the padding
}

}  // namespace pbert::model::testing
