// SQuAD 1.1 as Google's BERT reads, featurizes and answers it
// (run_squad.py): the official JSON (train-v1.1.json, dev-v1.1.json), the
// context split on whitespace with each character's word, WordPiece
// windows of max_seq_length tokens over the context at doc_stride, each
// token's word and whether this window gives it the most context; answers
// from the n best start and end logits of every window, mapped back to the
// context's characters; exact match and F1 as the official evaluation
// script computes them. docs/finetuning.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config_field.h"
#include "data/tokenizer.h"
#include "tasks/feature.h"

namespace pbert::tasks {

struct SquadOptions {
  int max_seq_length = 384;  // the finetune section's (FinetuneConfig::SequenceLength)
  int doc_stride = 128;
  int max_query_length = 64;
  // Questions of more than max_query_length tokens: an error naming the
  // question (false), or cut to that length, as run_squad.py does (true).
  bool truncate_questions = false;
  int n_best = 20;
  int max_answer_length = 30;

  template <class V>
  void Visit(V& v) {
    v.Field("doc_stride", &doc_stride, "tokens between the starts of a context's windows",
            config::InRange(1, 4096));
    v.Field("max_query_length", &max_query_length, "most tokens of a question",
            config::InRange(1, 1024));
    v.Field("truncate_questions", &truncate_questions,
            "cut longer questions to max_query_length (run_squad.py) instead of refusing them");
    v.Field("n_best", &n_best, "start and end candidates per window when answering",
            config::InRange(1, 1000));
    v.Field("max_answer_length", &max_answer_length, "most tokens of an answer",
            config::InRange(1, 4096));
  }
};

struct SquadExample {
  std::string id;
  std::string question;
  std::vector<std::string> words;  // the context split on whitespace (run_squad.py's doc_tokens)
  std::vector<std::string> answers;  // every answer's text
  // The first answer's first and last word (training).
  int start_word = -1, end_word = -1;
};

struct SquadSet {
  std::string path;
  std::vector<SquadExample> examples;
};

// Reads and checks a SQuAD 1.1 file: its structure, unique ids, at least
// one answer per question, each answer's text at its answer_start in the
// context. An error names the file and the question.
absl::StatusOr<SquadSet> ReadSquad(const std::string& path);

// One window of one example's context, with its question.
struct SquadFeature {
  Feature feature;
  int32_t example = 0;  // index into SquadSet::examples
  // Per position of the sequence: the context word of its token (-1 for
  // the [CLS], the question and the [SEP]s), and whether this window gives
  // the token the most context of all windows holding it.
  std::vector<int32_t> word;
  std::vector<uint8_t> max_context;
};

struct SquadFeatures {
  std::vector<SquadFeature> features;
  // Training examples left out because the whitespace-normalized answer is
  // not in the words it spans (run_squad.py's "Could not find answer").
  int64_t unanswerable = 0;
  int64_t truncated_questions = 0;
};

// run_squad.py's convert_examples_to_features. `training`: the answer
// spans are found (else every feature's start and end are 0).
absl::StatusOr<SquadFeatures> MakeSquadFeatures(const SquadSet& set,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options, bool training);

// A window's logits over the positions of its sequence.
struct SpanLogits {
  std::vector<float> start, end;
};

// Each example's answer (run_squad.py's write_predictions): in every window
// the n best starts and ends, pairs inside the context with the most
// context, end not before start, at most max_answer_length tokens; the best
// sum of logits over all windows, its tokens mapped back to the context's
// text (get_final_text). `logits[i]` belongs to `features.features[i]`.
// By id, in the examples' order.
using SquadPredictions = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<SquadPredictions> PredictAnswers(const SquadSet& set,
                                                const SquadFeatures& features,
                                                const std::vector<SpanLogits>& logits,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options);

// predictions.json in the official format: {"id": "answer", ...}.
std::string PredictionsJson(const SquadPredictions& predictions);

// The official evaluation (evaluate-v2.0.py on SQuAD 1.1 files): each
// answer normalized (lower case, no ASCII punctuation, no articles,
// whitespace collapsed), exact match and token F1 against the best of the
// gold answers, averaged over every question of `set`, in percent; a
// question without a prediction scores 0.
struct SquadScore {
  double exact_match = 0, f1 = 0;
  int64_t questions = 0, answered = 0;
};
SquadScore ScoreSquad(const SquadSet& set, const SquadPredictions& predictions);

// The official normalize_answer, for the tests.
std::string NormalizeAnswer(const std::string& text);

}  // namespace pbert::tasks
