// Vocabularies (vocab.txt), and a text tokenized with one that loads.
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::vocab {

PBERT_FUZZ_TARGET(vocab) {
  auto vocabulary = data::Vocabulary::Load(WriteInput("vocab.txt", input));
  if (!vocabulary.ok()) return false;
  const data::Tokenizer tokenizer(std::make_shared<data::Vocabulary>(std::move(*vocabulary)),
                                  /*lower_case=*/true);
  return !tokenizer.Encode("The quick brown fox's jump, 1984: naïve café über-long-word ##x [CLS]")
              .empty();
}

}  // namespace pbert::fuzz::vocab
