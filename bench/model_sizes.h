// The model sizes the benchmarks name, in one table: three of Google's BERT
// miniatures for CPUs (tiny, mini, medium) and BERT-base and -large as
// published. Every size has BERT's 30,522-word vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/bert_options.h"

namespace pbert::bench {

struct ModelSize {
  std::string name;
  int64_t hidden, layers, heads, ffn;

  // BERT of this size, every other option its default.
  model::BertOptions Options() const {
    return model::BertOptions().hidden_size(hidden).num_layers(layers).num_heads(heads).intermediate_size(ffn);
  }
};

inline const std::vector<ModelSize>& ModelSizes() {
  static const std::vector<ModelSize> sizes = {{"tiny", 128, 2, 2, 512},
                                               {"mini", 256, 4, 4, 1024},
                                               {"medium", 512, 8, 8, 2048},
                                               {"base", 768, 12, 12, 3072},
                                               {"large", 1024, 24, 16, 4096}};
  return sizes;
}

// The size called `name`, or null.
inline const ModelSize* FindModelSize(const std::string& name) {
  for (const ModelSize& size : ModelSizes()) {
    if (size.name == name) return &size;
  }
  return nullptr;
}

}  // namespace pbert::bench
