// Random pretraining instances for tests: [CLS]=1 ... [SEP]=2, segment B
// from the middle, ~15% masked (every fifth instance none), random NSP; and
// their comparison.
#pragma once

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/instance.h"
#include "gtest/gtest.h"

namespace pbert::testing {

inline std::vector<data::Instance> RandomInstances(int count, int min_len, int max_len, int vocab,
                                                   uint32_t seed) {
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

inline void ExpectSameInstance(const data::Instance& a, const data::Instance& b) {
  ASSERT_EQ(a.input_ids, b.input_ids);
  ASSERT_EQ(a.segment_ids, b.segment_ids);
  ASSERT_EQ(a.masked_positions, b.masked_positions);
  ASSERT_EQ(a.masked_ids, b.masked_ids);
  ASSERT_EQ(a.next_sentence_label, b.next_sentence_label);
}

// Writes a vocabulary of `size` words with BERT's special tokens where BERT
// has them ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); returns
// `path`.
inline std::string WriteTestVocab(const std::string& path, int size) {
  std::ofstream vocab(path);
  for (int i = 0; i < size; ++i) {
    vocab << (i == 0     ? "[PAD]"
              : i == 100 ? "[UNK]"
              : i == 101 ? "[CLS]"
              : i == 102 ? "[SEP]"
              : i == 103 ? "[MASK]"
                         : "w" + std::to_string(i))
          << "\n";
  }
  return path;
}

}  // namespace pbert::testing
