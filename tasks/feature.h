// A fine-tuning feature: one sequence the model reads, and what its head
// is trained toward. The packers, the pack index and data::MakeBatch take
// features as they take pretraining instances (a feature's sequence is an
// instance without masked tokens), so fine-tuning packs the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "data/instance.h"

namespace pbert::tasks {

struct Feature {
  data::Instance sequence;  // [CLS] A [SEP] (B [SEP]); segment ids; no masked tokens
  // Question answering: the answer's first and last token in `sequence`;
  // 0 and 0 (the [CLS]) when the answer is not in this window of the context.
  int32_t start = 0, end = 0;
  // Classification: the label's index; regression (STS-B): the score.
  float label = 0;
  // Token classification: each token's label, -1 where it has none (a
  // word's later sub-tokens, [CLS], [SEP]); multi-label classification:
  // the ids of the sequence's labels.
  std::vector<int32_t> token_labels, label_set;
};

}  // namespace pbert::tasks
