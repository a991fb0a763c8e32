#include "app/model_factory.h"

namespace pbert::app {

model::BertOptions ToBertOptions(const ModelConfig& c) {
  return model::BertOptions()
      .vocab_size(c.vocab_size)
      .hidden_size(c.hidden_size)
      .num_layers(c.num_layers)
      .num_heads(c.num_heads)
      .intermediate_size(c.intermediate_size)
      .max_position_embeddings(c.max_position_embeddings)
      .type_vocab_size(c.type_vocab_size)
      .hidden_dropout(c.hidden_dropout)
      .attention_dropout(c.attention_dropout)
      .initializer_range(c.initializer_range);
}

}  // namespace pbert::app
