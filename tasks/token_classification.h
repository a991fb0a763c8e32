// Token classification (named entities, the BERT paper's CoNLL-2003) as a
// task: sentences of CoNLL's files, each word's tag learnt on its first
// sub-token and the others ignored, as Hugging Face's run_ner.py does; a
// classifier on every token of the encoder (BertForTokenClassification, no
// pooler); entity-level precision, recall and F1 as conlleval counts them
// (seqeval's default); predictions written in CoNLL's layout.
// docs/finetuning.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tasks/fine_tuning.h"

namespace pbert::tasks {

// The task's name (finetune.task).
inline constexpr char kTokenClassification[] = "ner";

// A sentence of a CoNLL file: its words and their tags (empty where the
// file has none: a file to predict), and the line of its first word.
struct TaggedSentence {
  std::vector<std::string> words, tags;
  uint64_t line = 0;
};

// Reads a CoNLL file: a word a line, its columns separated by spaces or
// tabs, the tag last (`labeled`: two columns or more; otherwise the word
// alone is read); a blank line ends a sentence; "-DOCSTART-" lines (and
// their blank line) are document marks, no words. An error names the file
// and line: too few columns, a sentence whose words are all empty, no
// sentence at all.
absl::StatusOr<std::vector<TaggedSentence>> ReadConll(const std::string& path, bool labeled);

// The tag set of `sentences`, in class order: CoNLL-2003's nine (O, B-PER,
// I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC, the order of Hugging
// Face's conll2003 dataset) where every tag is one of them, IOB1 or IOB2;
// otherwise the tags found, sorted (as run_ner.py sorts them).
std::vector<std::string> TagSet(const std::vector<TaggedSentence>& sentences);

// An entity: its type and its first and last word, in a sequence of tags.
struct Entity {
  std::string type;
  size_t first = 0, last = 0;
  bool operator==(const Entity& o) const {
    return type == o.type && first == o.first && last == o.last;
  }
};

// The entities of `tags` as conlleval.pl chunks them (IOB1, IOB2, IOBES
// alike: a chunk starts at a B-, at an I- after O or after another type,
// and ends before the next chunk's start or an O).
std::vector<Entity> Entities(const std::vector<std::string>& tags);

// conlleval's counts over sentences: entities found in both with the same
// type and span, in the gold tags, in the predicted; and words tagged
// right. Precision, recall and F1 in [0, 1] (0 where a count is 0).
struct EntityScores {
  uint64_t correct = 0, gold = 0, predicted = 0, words = 0, words_right = 0;
  double precision() const { return predicted > 0 ? double(correct) / double(predicted) : 0.0; }
  double recall() const { return gold > 0 ? double(correct) / double(gold) : 0.0; }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
  double accuracy() const { return words > 0 ? double(words_right) / double(words) : 0.0; }
};
EntityScores ScoreEntities(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& predicted);

// The task of finetune.task ner: finetune.labels, or the training file's
// tag set (TagSet; a run that only evaluates takes the evaluated files').
absl::StatusOr<std::unique_ptr<Task>> MakeTokenClassification(const TaskSetup& setup);

// The token classifier's task over sets given whole (benchmarks, tests):
// features whose Feature::token_labels hold classes of `labels`.
std::unique_ptr<Task> MakeTokenClassTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts,
                                         int64_t labels);

}  // namespace pbert::tasks
