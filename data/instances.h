// Pretraining instances with the semantics of BERT's
// create_pretraining_data.py: for each of dupe_factor passes over the
// documents, sentences are gathered up to a target length (shorter with
// probability short_seq_prob), split into segments A and B, B replaced by
// text from another document half of the time (always when A is one
// sentence), the pair truncated from a random end, and tokens masked
// 80/10/10. Deterministic for a seed, whatever the thread count: each
// (pass, document) draws from its own random stream.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config_field.h"
#include "data/instance.h"
#include "data/tokenizer.h"

namespace pbert::data {

struct InstanceOptions {
  int max_seq_len = 128;
  int dupe_factor = 10;
  double short_seq_prob = 0.1;
  double masked_lm_prob = 0.15;
  int max_predictions_per_seq = 20;
  bool whole_word_mask = false;
  uint64_t seed = 12345;

  // The config's prepare keys of instance creation (max_seq_len and seed
  // come from the data and run sections).
  template <class V>
  void Visit(V& v) {
    using config::AtLeast;
    using config::InRange;
    v.Field("dupe_factor", &dupe_factor, "passes over the documents with different masks",
            InRange(1, 1000));
    v.Field("short_seq_prob", &short_seq_prob, "share of instances with a shorter target",
            InRange(0.0, 1.0));
    v.Field("masked_lm_prob", &masked_lm_prob, "share of tokens to mask", InRange(0.0, 1.0));
    v.Field("max_predictions_per_seq", &max_predictions_per_seq, "most masked tokens per sequence",
            InRange(1, 65535));
    v.Field("whole_word_mask", &whole_word_mask, "mask all pieces of a word together");
  }
};

// A document's sentences as token ids.
using TokenizedDocument = std::vector<std::vector<int32_t>>;

// The instances of all passes over `documents` (empty ones are skipped),
// shuffled. `threads` only changes how fast.
absl::StatusOr<std::vector<Instance>> CreateInstances(
    const std::vector<TokenizedDocument>& documents, const Tokenizer& tokenizer,
    const InstanceOptions& options, int threads);

}  // namespace pbert::data
