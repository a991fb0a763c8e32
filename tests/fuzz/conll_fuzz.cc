// CoNLL files (named entities), tagged or not, their tag set and entities.
#include "tasks/token_classification.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::conll {

PBERT_FUZZ_TARGET(conll) {
  const bool labeled = TakeChoice(&input, 2) == 1;
  auto sentences = tasks::ReadConll(WriteInput("train.txt", input), labeled);
  if (!sentences.ok()) return false;
  (void)tasks::TagSet(*sentences);
  std::vector<std::vector<std::string>> tags;
  for (const auto& sentence : *sentences) {
    (void)tasks::Entities(sentence.tags);
    tags.push_back(sentence.tags);
  }
  return tasks::ScoreEntities(tags, tags).f1() >= 0;
}

}  // namespace pbert::fuzz::conll
