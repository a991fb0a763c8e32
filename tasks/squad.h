// SQuAD 1.1 and 2.0 as Google's BERT reads, featurizes and answers them
// (run_squad.py, with version_2_with_negative for 2.0): the official JSON
// (train-v1.1.json, dev-v2.0.json, ...), the context split on whitespace
// with each character's word, WordPiece windows of max_seq_length tokens
// over the context at doc_stride, each token's word and whether this
// window gives it the most context; answers from the n best start and end
// logits of every window, mapped back to the context's characters, with
// 2.0's null answer against its threshold; exact match and F1 (and 2.0's
// HasAns, NoAns and best-threshold scores) as the official evaluation
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
  // SQuAD 2.0: questions may have no answer (is_impossible).
  bool version_2_with_negative = false;
  // 2.0: the null answer when its score exceeds the best span's by more
  // than this (run_squad.py's null_score_diff_threshold).
  double null_score_diff_threshold = 0.0;

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
    v.Field("version_2_with_negative", &version_2_with_negative,
            "SQuAD 2.0: questions may have no answer (is_impossible); predict the null answer");
    v.Field("null_score_diff_threshold", &null_score_diff_threshold,
            "SQuAD 2.0: predict the null answer when its score exceeds the best span's by more "
            "than this",
            config::InRange(-1e6, 1e6));
  }
};

struct SquadExample {
  std::string id;
  std::string question;
  std::vector<std::string> words;    // the context split on whitespace (run_squad.py's doc_tokens)
  std::vector<std::string> answers;  // every answer's text
  // The first answer's first and last word (training).
  int start_word = -1, end_word = -1;
  bool impossible = false;  // SQuAD 2.0's is_impossible: no answer
};

struct SquadSet {
  std::string path;
  std::vector<SquadExample> examples;
};

// What a file is read as: SQuAD 2.0 (questions may be is_impossible, with
// no answer) or 1.1 (every question has one); with its answers (a
// training or dev file) or questions to predict (answers not read; a file
// that has them is said so, once).
struct SquadReading {
  bool version_2 = false;
  bool answers = true;
};

// Reads and checks a SQuAD file: its structure, unique ids, each context
// with words, the answers as `reading` asks (each text at its
// answer_start in the context; a 2.0 question with answers but
// is_impossible, or without either, is refused; so is a 2.0 file read as
// 1.1, naming the key that reads it). An error names the file and the
// question.
absl::StatusOr<SquadSet> ReadSquad(const std::string& path, const SquadReading& reading = {});

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
// spans are found (else every feature's start and end are 0; so are an
// impossible question's).
absl::StatusOr<SquadFeatures> MakeSquadFeatures(const SquadSet& set,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options, bool training);

// A window's logits over the positions of its sequence.
struct SpanLogits {
  std::vector<float> start, end;
};

// One of a question's n best answers, as nbest_predictions.json lists it.
struct NbestAnswer {
  std::string text;
  double probability = 0;  // the softmax of the n best's start + end logits
  double start_logit = 0, end_logit = 0;
};

// A question's answer: its text (2.0: "" for the null answer), its n best,
// and (2.0) how much the null answer's score exceeds the best span's
// (null_odds.json).
struct SquadAnswer {
  std::string id;
  std::string text;
  std::vector<NbestAnswer> nbest;
  double null_odds = 0;
};
using SquadPredictions = std::vector<SquadAnswer>;

// Each example's answer (run_squad.py's write_predictions): in every window
// the n best starts and ends, pairs inside the context with the most
// context, end not before start, at most max_answer_length tokens, and
// with version_2_with_negative the null answer of the window whose [CLS]
// scores least; sorted by the sum of logits, each span's tokens mapped
// back to the context's text (get_final_text), the n best distinct texts
// kept; 2.0 answers "" when the null's score minus the best span's exceeds
// null_score_diff_threshold. `logits[i]` belongs to `features.features[i]`.
// In the examples' order.
absl::StatusOr<SquadPredictions> PredictAnswers(const SquadSet& set, const SquadFeatures& features,
                                                const std::vector<SpanLogits>& logits,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options);

// The files run_squad.py writes, in its format (json.dumps, indent 4):
// predictions.json {"id": "answer"}, nbest_predictions.json {"id": [{text,
// probability, start_logit, end_logit}, ...]}, null_odds.json (2.0)
// {"id": null score minus the best span's}.
std::string PredictionsJson(const SquadPredictions& predictions);
std::string NbestJson(const SquadPredictions& predictions);
std::string NullOddsJson(const SquadPredictions& predictions);

// The official evaluation (evaluate-v2.0.py): each answer normalized
// (lower case, no ASCII punctuation, no articles, whitespace collapsed),
// exact match and token F1 against the best of the gold answers (a
// question without one: against ""), averaged over the questions
// predicted, in percent; then over those with an answer (HasAns) and
// those without (NoAns); and, from each answer's null odds as the
// script's --na-prob-file, the best exact match and F1 over every
// threshold (best_exact, best_f1, with their thresholds).
struct SquadScore {
  double exact_match = 0, f1 = 0;
  int64_t questions = 0, answered = 0;
  double has_answer_exact = 0, has_answer_f1 = 0, no_answer_exact = 0, no_answer_f1 = 0;
  int64_t has_answer = 0, no_answer = 0;  // questions of each kind
  double best_exact = 0, best_exact_thresh = 0, best_f1 = 0, best_f1_thresh = 0;
};
SquadScore ScoreSquad(const SquadSet& set, const SquadPredictions& predictions);

// The official normalize_answer, for the tests.
std::string NormalizeAnswer(const std::string& text);

}  // namespace pbert::tasks
