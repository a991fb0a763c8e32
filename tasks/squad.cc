#include "tasks/squad.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tasks/text.h"

namespace pbert::tasks {
namespace {

using json = nlohmann::json;

absl::Status Bad(const std::string& path, absl::string_view record, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", record, ": ", what));
}

// A string member of `object`, or an error naming `record`.
absl::StatusOr<std::string> StringOf(const json& object, const char* key, const std::string& path,
                                     const std::string& record) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return Bad(path, record, absl::StrCat("has no \"", key, "\" string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<const json*> ArrayOf(const json& object, const char* key, const std::string& path,
                                    const std::string& record) {
  if (!object.is_object()) return Bad(path, record, "is not a JSON object");
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) {
    return Bad(path, record, absl::StrCat("has no \"", key, "\" list"));
  }
  return &*it;
}

// One paragraph's context split as run_squad.py splits it: words between
// whitespace, and the word of every character (of the word before, for
// whitespace; -1 before the first word).
struct SplitContext {
  std::u32string text;
  std::vector<std::string> words;
  std::vector<int32_t> char_to_word;
};

SplitContext Split(const std::string& context) {
  SplitContext out;
  out.text = ToCodePoints(context);
  std::vector<std::u32string> words;
  bool previous_space = true;
  for (char32_t c : out.text) {
    if (IsSquadSpace(c)) {
      previous_space = true;
    } else {
      if (previous_space) words.emplace_back();
      words.back().push_back(c);
      previous_space = false;
    }
    out.char_to_word.push_back(static_cast<int32_t>(words.size()) - 1);
  }
  out.words.reserve(words.size());
  for (const auto& w : words) out.words.push_back(ToUtf8(w));
  return out;
}

// run_squad.py's _check_is_max_context over windows (start, length).
bool IsMaxContext(const std::vector<std::pair<int, int>>& windows, size_t current, int position) {
  double best_score = -1;
  size_t best = 0;
  // The windows' starts and ends ascend, so those that hold `position` are
  // a run of them, found by bisection and visited in order (a scan of them
  // all for every token costs time quadratic in a context's length).
  const auto first = std::partition_point(windows.begin(), windows.end(), [&](const auto& w) {
    return w.first + w.second - 1 < position;
  });
  for (size_t i = first - windows.begin(); i < windows.size() && windows[i].first <= position;
       ++i) {
    const int start = windows[i].first, end = windows[i].first + windows[i].second - 1;
    const double score = std::min(position - start, end - position) + 0.01 * windows[i].second;
    if (best_score < 0 || score > best_score) {
      best_score = score;
      best = i;
    }
  }
  return best == current;
}

// The indices of the n largest values, largest first; ties in index order
// (Python's stable sort).
std::vector<int> BestIndexes(const std::vector<float>& logits, int n) {
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (static_cast<int>(order.size()) > n) order.resize(n);
  return order;
}

// run_squad.py's _strip_spaces: the text without ' ', and where each of
// its characters was.
std::pair<std::u32string, std::vector<int>> StripSpaces(const std::u32string& text) {
  std::u32string kept;
  std::vector<int> where;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    where.push_back(static_cast<int>(i));
    kept.push_back(text[i]);
  }
  return {kept, where};
}

// run_squad.py's get_final_text: the span of `orig` (the context's words)
// that `predicted` (the answer's WordPiece text, normalized) covers, found
// through the basic tokenizer's view of `orig`; `orig` whole when the two
// do not align.
std::u32string FinalText(const std::u32string& predicted, const std::u32string& orig,
                         const data::Tokenizer& tokenizer) {
  const std::u32string tokens =
      ToCodePoints(absl::StrJoin(tokenizer.BasicTokens(ToUtf8(orig)), " "));
  const size_t start = tokens.find(predicted);
  if (start == std::u32string::npos || predicted.empty()) return orig;
  const size_t end = start + predicted.size() - 1;
  auto [orig_ns, orig_ns_to_s] = StripSpaces(orig);
  auto [tok_ns, tok_ns_to_s] = StripSpaces(tokens);
  if (orig_ns.size() != tok_ns.size()) return orig;
  absl::flat_hash_map<int, int> tok_s_to_ns;
  for (size_t i = 0; i < tok_ns_to_s.size(); ++i) tok_s_to_ns[tok_ns_to_s[i]] = static_cast<int>(i);
  const std::vector<int>& orig_to_s = orig_ns_to_s;  // (a lambda takes no binding in C++17)
  auto orig_position = [&](size_t s) -> int {
    auto it = tok_s_to_ns.find(static_cast<int>(s));
    if (it == tok_s_to_ns.end() || it->second >= static_cast<int>(orig_to_s.size())) return -1;
    return orig_to_s[it->second];
  };
  const int orig_start = orig_position(start), orig_end = orig_position(end);
  if (orig_start < 0 || orig_end < 0) return orig;
  return orig.substr(orig_start, orig_end - orig_start + 1);
}

bool IsWordChar(char32_t c) {
  if (c == U'_') return true;
  const int8_t type = u_charType(static_cast<UChar32>(c));
  switch (type) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return true;
    default:
      return false;
  }
}

std::vector<std::u32string> AnswerTokens(const std::string& text) {
  return SplitPython(ToCodePoints(NormalizeAnswer(text)));
}

double TokenF1(const std::vector<std::u32string>& gold, const std::vector<std::u32string>& pred) {
  if (gold.empty() || pred.empty()) return gold == pred ? 1.0 : 0.0;
  absl::flat_hash_map<std::u32string, int> counts;
  for (const auto& t : gold) ++counts[t];
  int same = 0;
  for (const auto& t : pred) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = 1.0 * same / static_cast<double>(pred.size());
  const double recall = 1.0 * same / static_cast<double>(gold.size());
  return (2 * precision * recall) / (precision + recall);
}

}  // namespace

namespace {

// Answer `answer` (named `name`) of a question of the context `split`: its
// text at its answer_start; the first gives the question's words.
absl::Status ReadAnswer(const json& answer, const SplitContext& split, const std::string& path,
                        const std::string& name, bool first, SquadExample* example) {
  ASSIGN_OR_RETURN(std::string answer_text, StringOf(answer, "text", path, name));
  auto start_it = answer.find("answer_start");
  if (start_it == answer.end() || !start_it->is_number_integer()) {
    return Bad(path, name, "has no integer \"answer_start\"");
  }
  // The parser keeps a number of 0 or more unsigned: 2^63 and over too.
  const bool negative = !start_it->is_number_unsigned();
  const uint64_t start = negative ? 0 : start_it->get<uint64_t>();
  const std::u32string answer_chars = ToCodePoints(answer_text);
  if (answer_chars.empty()) return Bad(path, name, "is empty");
  if (JoinedWords(answer_chars).empty()) return Bad(path, name, "is only whitespace");
  const uint64_t size = split.text.size();
  if (negative || start > size || answer_chars.size() > size - start ||
      split.text.compare(start, answer_chars.size(), answer_chars) != 0) {
    const std::u32string found = !negative && start < size
                                     ? split.text.substr(start, answer_chars.size())
                                     : std::u32string();
    return Bad(path, name,
               absl::StrCat("\"", answer_text, "\" is not at answer_start ", start_it->dump(),
                            " of its context (", size, " characters; there it reads \"",
                            ToUtf8(found), "\")"));
  }
  if (first) {
    example->start_word = std::max(0, split.char_to_word[start]);
    example->end_word = split.char_to_word[start + answer_chars.size() - 1];
  }
  example->answers.push_back(std::move(answer_text));
  return absl::OkStatus();
}

// Question `qa` (named `name`) of the context `split`, read as `reading`
// says; `ignored` counts the answers of a file to predict.
absl::StatusOr<SquadExample> ReadQuestion(const json& qa, const SplitContext& split,
                                          const std::string& path, std::string name,
                                          const SquadReading& reading,
                                          absl::flat_hash_set<std::string>* ids,
                                          int64_t* ignored) {
  if (!qa.is_object()) return Bad(path, name, "is not a JSON object");
  SquadExample example;
  ASSIGN_OR_RETURN(example.id, StringOf(qa, "id", path, name));
  name = absl::StrCat("question ", example.id);
  if (!ids->insert(example.id).second) return Bad(path, name, "its id is used twice");
  ASSIGN_OR_RETURN(example.question, StringOf(qa, "question", path, name));
  example.words = split.words;
  if (const auto it = qa.find("is_impossible"); it != qa.end()) {
    if (!it->is_boolean()) return Bad(path, name, "has an \"is_impossible\" that is no bool");
    example.impossible = it->get<bool>();
  }
  if (!reading.answers) {
    const auto it = qa.find("answers");
    *ignored += it != qa.end() && it->is_array() && !it->empty();
    return example;
  }
  if (example.impossible && !reading.version_2) {
    return Bad(path, name,
               "is_impossible: a SQuAD 2.0 question; set "
               "finetune.version_2_with_negative: true to read the file as SQuAD 2.0");
  }
  ASSIGN_OR_RETURN(const json* answers, ArrayOf(qa, "answers", path, name));
  if (example.impossible && !answers->empty()) {
    return Bad(path, name,
               absl::StrCat("is_impossible and has ", answers->size(),
                            " answers: a question has answers or none"));
  }
  if (!example.impossible && answers->empty()) {
    return Bad(path, name,
               reading.version_2
                   ? "has no answer and is not is_impossible"
                   : "has no answer (SQuAD 1.1 gives every question one; a SQuAD 2.0 file "
                     "needs finetune.version_2_with_negative: true)");
  }
  for (size_t k = 0; k < answers->size(); ++k) {
    RETURN_IF_ERROR(ReadAnswer((*answers)[k], split, path, absl::StrCat(name, ", answer ", k),
                               k == 0, &example));
  }
  return example;
}

}  // namespace

absl::StatusOr<SquadSet> ReadSquad(const std::string& path, const SquadReading& reading) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    std::string why = FirstLine(e);
    if (why.size() > 160) why = why.substr(0, 160) + "...";  // the parser quotes what it read
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a SQuAD JSON file (", why, ")"));
  }
  SquadSet set;
  set.path = path;
  ASSIGN_OR_RETURN(const json* articles, ArrayOf(root, "data", path, "the file"));
  absl::flat_hash_set<std::string> ids;
  int64_t ignored_answers = 0;
  for (size_t a = 0; a < articles->size(); ++a) {
    const std::string article_name = absl::StrCat("data[", a, "]");
    ASSIGN_OR_RETURN(const json* paragraphs,
                     ArrayOf((*articles)[a], "paragraphs", path, article_name));
    for (size_t p = 0; p < paragraphs->size(); ++p) {
      const json& paragraph = (*paragraphs)[p];
      const std::string paragraph_name = absl::StrCat(article_name, ".paragraphs[", p, "]");
      ASSIGN_OR_RETURN(const json* questions, ArrayOf(paragraph, "qas", path, paragraph_name));
      ASSIGN_OR_RETURN(std::string context, StringOf(paragraph, "context", path, paragraph_name));
      const SplitContext split = Split(context);
      if (split.words.empty() && !questions->empty()) {
        return Bad(path, paragraph_name,
                   "its context holds no word (only whitespace): no question can be answered "
                   "from it");
      }
      for (size_t q = 0; q < questions->size(); ++q) {
        ASSIGN_OR_RETURN(SquadExample example,
                         ReadQuestion((*questions)[q], split, path,
                                      absl::StrCat(paragraph_name, ".qas[", q, "]"), reading,
                                      &ids, &ignored_answers));
        set.examples.push_back(std::move(example));
      }
    }
  }
  if (set.examples.empty()) return Bad(path, "the file", "holds no question");
  if (ignored_answers > 0) {
    logging::Get("finetune")
        ->warn(
            "{}: {} questions have answers; they are predicted, not scored (a dev file to score is "
            "finetune.eval_file)",
            path, ignored_answers);
  }
  return set;
}

absl::StatusOr<SquadFeatures> MakeSquadFeatures(const SquadSet& set,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options, bool training) {
  if (options.max_query_length + 3 >= options.max_seq_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_query_length ", options.max_query_length,
        " leaves no room for the context in sequences of ", options.max_seq_length, " tokens"));
  }
  const data::SpecialTokens& special = tokenizer.vocabulary().special();
  SquadFeatures out;
  for (size_t e = 0; e < set.examples.size(); ++e) {
    const SquadExample& example = set.examples[e];
    std::vector<int32_t> query = tokenizer.Encode(example.question);
    if (static_cast<int>(query.size()) > options.max_query_length) {
      if (!options.truncate_questions) {
        return absl::InvalidArgumentError(absl::StrCat(
            set.path, ": question ", example.id, ": ", query.size(),
            " tokens, more than finetune.max_query_length ", options.max_query_length,
            " (set finetune.truncate_questions=true to cut such questions, as run_squad.py does)"));
      }
      query.resize(options.max_query_length);
      ++out.truncated_questions;
    }
    // The context's WordPiece tokens, each with its word.
    std::vector<int32_t> tokens, token_word, word_token;
    for (size_t w = 0; w < example.words.size(); ++w) {
      word_token.push_back(static_cast<int32_t>(tokens.size()));
      for (int32_t id : tokenizer.Encode(example.words[w])) {
        tokens.push_back(id);
        token_word.push_back(static_cast<int32_t>(w));
      }
    }
    int answer_start = -1, answer_end = -1;
    if (training && !example.impossible) {
      // run_squad.py leaves out answers it cannot find in their words.
      std::string spanned;
      for (int w = example.start_word; w <= example.end_word; ++w) {
        absl::StrAppend(&spanned, w > example.start_word ? " " : "", example.words[w]);
      }
      if (ToCodePoints(spanned).find(JoinedWords(ToCodePoints(example.answers[0]))) ==
          std::u32string::npos) {
        ++out.unanswerable;
        continue;
      }
      answer_start = word_token[example.start_word];
      answer_end = example.end_word + 1 < static_cast<int>(example.words.size())
                       ? word_token[example.end_word + 1] - 1
                       : static_cast<int>(tokens.size()) - 1;
      // _improve_answer_span: the tightest tokens that spell the answer, the
      // first from the left (of the spans it tries, only those of the
      // answer's own length can spell it).
      const std::vector<int32_t> wanted = tokenizer.Encode(example.answers[0]);
      const int width = static_cast<int>(wanted.size());
      for (int s = answer_start; width > 0 && s + width - 1 <= answer_end; ++s) {
        if (std::equal(wanted.begin(), wanted.end(), tokens.begin() + s)) {
          answer_start = s;
          answer_end = s + width - 1;
          break;
        }
      }
    }
    // Windows over the context.
    const int room = options.max_seq_length - static_cast<int>(query.size()) - 3;
    std::vector<std::pair<int, int>> windows;
    const int n = static_cast<int>(tokens.size());
    for (int start = 0; start < n;) {
      const int length = std::min(n - start, room);
      windows.emplace_back(start, length);
      if (start + length == n) break;
      start += std::min(length, options.doc_stride);
    }
    for (size_t k = 0; k < windows.size(); ++k) {
      const auto [start, length] = windows[k];
      SquadFeature f;
      f.example = static_cast<int32_t>(e);
      data::Instance& s = f.feature.sequence;
      s.input_ids.push_back(special.cls);
      s.input_ids.insert(s.input_ids.end(), query.begin(), query.end());
      s.input_ids.push_back(special.sep);
      s.segment_ids.assign(s.input_ids.size(), 0);
      f.word.assign(s.input_ids.size(), -1);
      f.max_context.assign(s.input_ids.size(), 0);
      for (int i = start; i < start + length; ++i) {
        s.input_ids.push_back(tokens[i]);
        s.segment_ids.push_back(1);
        f.word.push_back(token_word[i]);
        f.max_context.push_back(IsMaxContext(windows, k, i) ? 1 : 0);
      }
      s.input_ids.push_back(special.sep);
      s.segment_ids.push_back(1);
      f.word.push_back(-1);
      f.max_context.push_back(0);
      if (answer_start >= 0 && answer_start >= start && answer_end <= start + length - 1) {
        const int offset = static_cast<int>(query.size()) + 2 - start;
        f.feature.start = answer_start + offset;
        f.feature.end = answer_end + offset;
      }
      out.features.push_back(std::move(f));
    }
  }
  return out;
}

namespace {

// A candidate answer of write_predictions: a span of a feature (start 0:
// the null answer) and its logits.
struct Candidate {
  size_t feature;
  int start, end;
  double start_logit, end_logit;
  double score() const { return start_logit + end_logit; }
};

// The text of `c`'s span, mapped back to the context (get_final_text).
std::string SpanText(const SquadExample& example, const SquadFeature& f, const Candidate& c,
                     const data::Tokenizer& tokenizer) {
  const data::Vocabulary& vocabulary = tokenizer.vocabulary();
  std::string pieces;
  for (int p = c.start; p <= c.end; ++p) {
    absl::StrAppend(&pieces, p > c.start ? " " : "",
                    vocabulary.token(f.feature.sequence.input_ids[p]));
  }
  std::u32string text = ToCodePoints(pieces);
  // tok_text.replace(" ##", "").replace("##", "")
  for (const std::u32string marker : {U" ##", U"##"}) {
    for (size_t at; (at = text.find(marker)) != std::u32string::npos;)
      text.erase(at, marker.size());
  }
  text = JoinedWords(text);
  std::string orig;
  for (int w = f.word[c.start]; w <= f.word[c.end]; ++w) {
    absl::StrAppend(&orig, w > f.word[c.start] ? " " : "", example.words[w]);
  }
  return ToUtf8(FinalText(text, ToCodePoints(orig), tokenizer));
}

// _compute_softmax: of the scores, in double, the largest subtracted.
std::vector<double> Softmax(const std::vector<double>& scores) {
  const double largest = *std::max_element(scores.begin(), scores.end());
  std::vector<double> out;
  double total = 0;
  for (double s : scores) total += out.emplace_back(std::exp(s - largest));
  for (double& p : out) p /= total;
  return out;
}

// One example's answer from its features `mine` (write_predictions).
SquadAnswer AnswerOf(const SquadExample& example, const SquadFeatures& features,
                     const std::vector<size_t>& mine, const std::vector<SpanLogits>& logits,
                     const data::Tokenizer& tokenizer, const SquadOptions& options) {
  const bool v2 = options.version_2_with_negative;
  std::vector<Candidate> candidates;
  Candidate null{0, 0, 0, 0, 0};
  double null_score = 1e6;  // run_squad.py's "large and positive" start
  for (size_t i : mine) {
    const SquadFeature& f = features.features[i];
    const std::vector<float>& start = logits[i].start;
    const std::vector<float>& end = logits[i].end;
    if (v2 && double{start[0]} + double{end[0]} < null_score) {
      null_score = double{start[0]} + double{end[0]};
      null = {i, 0, 0, start[0], end[0]};
    }
    const int n = static_cast<int>(f.word.size());
    for (int s : BestIndexes(start, options.n_best)) {
      for (int t : BestIndexes(end, options.n_best)) {
        if (s >= n || t >= n || f.word[s] < 0 || f.word[t] < 0 || !f.max_context[s] || t < s ||
            t - s + 1 > options.max_answer_length) {
          continue;
        }
        candidates.push_back({i, s, t, start[s], end[t]});
      }
    }
  }
  if (v2) candidates.push_back(null);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score() > b.score(); });
  // The n best distinct texts; the null answer (start 0) is "".
  std::vector<std::pair<std::string, const Candidate*>> nbest;
  absl::flat_hash_set<std::string> seen;
  for (const Candidate& c : candidates) {
    if (static_cast<int>(nbest.size()) >= options.n_best) break;
    std::string text;
    if (c.start > 0) {
      text = SpanText(example, features.features[c.feature], c, tokenizer);
      if (!seen.insert(text).second) continue;
    } else {
      seen.insert(text);
    }
    nbest.emplace_back(std::move(text), &c);
  }
  if (v2 && seen.count("") == 0) nbest.emplace_back("", &null);
  const Candidate nonce{0, 0, 0, 0, 0};
  if (nbest.empty()) nbest.emplace_back("empty", &nonce);  // run_squad.py's when nothing qualifies
  SquadAnswer answer;
  answer.id = example.id;
  std::vector<double> scores;
  for (const auto& [text, c] : nbest) scores.push_back(c->score());
  const std::vector<double> probabilities = Softmax(scores);
  int best = -1;  // the first entry with a text: the best span
  for (size_t k = 0; k < nbest.size(); ++k) {
    const Candidate& c = *nbest[k].second;
    answer.nbest.push_back({nbest[k].first, probabilities[k], c.start_logit, c.end_logit});
    if (best < 0 && !nbest[k].first.empty()) best = static_cast<int>(k);
  }
  if (!v2) {
    answer.text = answer.nbest.front().text;
    return answer;
  }
  // No span at all: the null answer, at the odds of the null score alone.
  if (best < 0) {
    answer.null_odds = null_score;
    return answer;
  }
  const NbestAnswer& span = answer.nbest[best];
  answer.null_odds = null_score - span.start_logit - span.end_logit;
  answer.text = answer.null_odds > options.null_score_diff_threshold ? "" : span.text;
  return answer;
}

}  // namespace

absl::StatusOr<SquadPredictions> PredictAnswers(const SquadSet& set, const SquadFeatures& features,
                                                const std::vector<SpanLogits>& logits,
                                                const data::Tokenizer& tokenizer,
                                                const SquadOptions& options) {
  if (logits.size() != features.features.size()) {
    return absl::InternalError(absl::StrCat("PredictAnswers: ", logits.size(), " logits for ",
                                            features.features.size(), " features"));
  }
  std::vector<std::vector<size_t>> of_example(set.examples.size());
  for (size_t i = 0; i < features.features.size(); ++i) {
    const SquadFeature& f = features.features[i];
    if (f.example < 0 || static_cast<size_t>(f.example) >= set.examples.size() ||
        logits[i].start.size() != f.word.size() || logits[i].end.size() != f.word.size()) {
      return absl::InternalError(absl::StrCat("PredictAnswers: feature ", i, " does not fit"));
    }
    of_example[f.example].push_back(i);
  }
  SquadPredictions predictions;
  for (size_t e = 0; e < set.examples.size(); ++e) {
    predictions.push_back(
        AnswerOf(set.examples[e], features, of_example[e], logits, tokenizer, options));
  }
  return predictions;
}

std::string PredictionsJson(const SquadPredictions& predictions) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SquadAnswer& a : predictions) out[a.id] = a.text;
  return out.dump(4) + "\n";
}

std::string NbestJson(const SquadPredictions& predictions) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SquadAnswer& a : predictions) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const NbestAnswer& n : a.nbest) {
      nlohmann::ordered_json entry;
      entry["text"] = n.text;
      entry["probability"] = n.probability;
      entry["start_logit"] = n.start_logit;
      entry["end_logit"] = n.end_logit;
      list.push_back(std::move(entry));
    }
    out[a.id] = std::move(list);
  }
  return out.dump(4) + "\n";
}

std::string NullOddsJson(const SquadPredictions& predictions) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SquadAnswer& a : predictions) out[a.id] = a.null_odds;
  return out.dump(4) + "\n";
}

std::string NormalizeAnswer(const std::string& text) {
  icu::UnicodeString lowered = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  lowered.toLower(icu::Locale::getRoot());
  std::string utf8;
  lowered.toUTF8String(utf8);
  std::u32string chars;
  for (char32_t c : ToCodePoints(utf8)) {
    // string.punctuation: the ASCII punctuation characters.
    const bool punctuation = c < 128 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
                                         (c >= 91 && c <= 96) || (c >= 123 && c <= 126));
    if (!punctuation) chars.push_back(c);
  }
  // \b(a|an|the)\b: a maximal run of word characters that is an article.
  std::u32string spaced;
  for (size_t i = 0; i < chars.size();) {
    if (!IsWordChar(chars[i])) {
      spaced.push_back(chars[i++]);
      continue;
    }
    size_t j = i;
    while (j < chars.size() && IsWordChar(chars[j])) ++j;
    const std::u32string_view word(chars.data() + i, j - i);
    if (word == U"a" || word == U"an" || word == U"the") {
      spaced.push_back(U' ');
    } else {
      spaced.append(word);
    }
    i = j;
  }
  return ToUtf8(JoinedWords(spaced));
}

SquadScore ScoreSquad(const SquadSet& set, const SquadPredictions& predictions) {
  absl::flat_hash_map<std::string, const SquadAnswer*> by_id;
  for (const SquadAnswer& a : predictions) by_id[a.id] = &a;
  // Each predicted question's scores, in the set's order.
  struct Scored {
    const SquadAnswer* answer;
    bool has_answer;
    double exact, f1;
  };
  std::vector<Scored> scored;
  SquadScore score;
  for (const SquadExample& example : set.examples) {
    ++score.questions;
    const bool has_answer = !example.answers.empty();
    (has_answer ? score.has_answer : score.no_answer) += 1;
    auto it = by_id.find(example.id);
    if (it == by_id.end()) continue;  // the official script leaves it out
    std::vector<std::string> gold;
    for (const auto& a : example.answers) {
      if (!NormalizeAnswer(a).empty()) gold.push_back(a);
    }
    if (gold.empty()) gold.emplace_back();
    const std::string predicted = NormalizeAnswer(it->second->text);
    const auto predicted_tokens = AnswerTokens(it->second->text);
    double best_exact = 0, best_f1 = 0;
    for (const auto& g : gold) {
      best_exact = std::max(best_exact, NormalizeAnswer(g) == predicted ? 1.0 : 0.0);
      best_f1 = std::max(best_f1, TokenF1(AnswerTokens(g), predicted_tokens));
    }
    scored.push_back({it->second, has_answer, best_exact, best_f1});
  }
  score.answered = static_cast<int64_t>(scored.size());
  if (scored.empty()) return score;
  // make_eval_dict over every predicted question, those with answers and
  // those without.
  auto mean = [&](double Scored::*field, int kind) {
    double sum = 0;
    int64_t n = 0;
    for (const Scored& s : scored) {
      if (kind >= 0 && s.has_answer != (kind == 1)) continue;
      sum += s.*field;
      ++n;
    }
    return n > 0 ? 100.0 * sum / static_cast<double>(n) : 0.0;
  };
  score.exact_match = mean(&Scored::exact, -1);
  score.f1 = mean(&Scored::f1, -1);
  score.has_answer_exact = mean(&Scored::exact, 1);
  score.has_answer_f1 = mean(&Scored::f1, 1);
  score.no_answer_exact = mean(&Scored::exact, 0);
  score.no_answer_f1 = mean(&Scored::f1, 0);
  // find_best_thresh, the null odds as the probabilities of no answer: the
  // questions by their odds (stable), each moving the score by what
  // answering it earns.
  std::vector<const Scored*> by_odds;
  for (const Scored& s : scored) by_odds.push_back(&s);
  std::stable_sort(by_odds.begin(), by_odds.end(), [](const Scored* a, const Scored* b) {
    return a->answer->null_odds < b->answer->null_odds;
  });
  auto best = [&](double Scored::*field, double* threshold) {
    double current = static_cast<double>(score.no_answer), top = current;
    *threshold = 0.0;
    for (const Scored* s : by_odds) {
      current += s->has_answer ? s->*field : (s->answer->text.empty() ? 0.0 : -1.0);
      if (current > top) {
        top = current;
        *threshold = s->answer->null_odds;
      }
    }
    return 100.0 * top / static_cast<double>(scored.size());
  };
  score.best_exact = best(&Scored::exact, &score.best_exact_thresh);
  score.best_f1 = best(&Scored::f1, &score.best_f1_thresh);
  return score;
}

}  // namespace pbert::tasks
