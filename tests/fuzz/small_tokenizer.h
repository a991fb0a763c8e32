// A WordPiece tokenizer over a small vocabulary for the text readers'
// targets: BERT's special tokens where BERT has them, every ASCII letter,
// digit and punctuation mark alone and as a "##" continuation, and a few
// words; so that every word of ASCII text has pieces and long words many.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz {

inline const data::Tokenizer& SmallTokenizer() {
  static const data::Tokenizer* tokenizer = [] {
    std::string text;
    for (int i = 0; i < 100; ++i)
      text += i == 0 ? "[PAD]\n" : "[unused" + std::to_string(i) + "]\n";
    text += "[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int c = 33; c < 127; ++c) text += std::string(1, static_cast<char>(c)) + "\n";
    for (int c = 33; c < 127; ++c) text += "##" + std::string(1, static_cast<char>(c)) + "\n";
    text += "the\nof\nand\nin\nwho\nwhat\n##ing\n##ed\n";
    auto vocabulary = data::Vocabulary::Load(WriteInput("small-vocab.txt", text));
    if (!vocabulary.ok()) {
      std::fprintf(stderr, "fuzz: the small vocabulary: %s\n",
                   std::string(vocabulary.status().message()).c_str());
      std::abort();
    }
    return new data::Tokenizer(std::make_shared<data::Vocabulary>(std::move(*vocabulary)),
                               /*lower_case=*/true);
  }();
  return *tokenizer;
}

}  // namespace pbert::fuzz
