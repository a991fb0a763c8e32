// The BERT tokenizer: basic tokenization (text cleanup, CJK and punctuation
// splitting, lower-casing and accent stripping for uncased vocabularies),
// then greedy longest-match-first WordPiece, as in Google's reference
// tokenization.py, with [UNK] for words over 200 characters (as that
// reference, which made the MLPerf data, does; Hugging Face uses 100: see
// the constructor). Unicode properties come from ICU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pbert::data {

struct SpecialTokens {
  int32_t pad = 0, unk = 100, cls = 101, sep = 102, mask = 103;
};

class Vocabulary {
 public:
  // One token per line (stripped of surrounding whitespace); the line
  // number is the id. Fails, naming the file and line, if [PAD], [UNK],
  // [CLS], [SEP] or [MASK] is missing, a token repeats, a line is blank or
  // the file starts with a byte order mark.
  static absl::StatusOr<Vocabulary> Load(const std::string& path);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[id]; }
  const SpecialTokens& special() const { return special_; }
  // -1 if absent. `continuation`: look up "##" + piece.
  int32_t Find(absl::string_view piece, bool continuation) const;
  // XXH3 of the token list, to tie stores to the vocabulary they used.
  uint64_t checksum() const { return checksum_; }

 private:
  std::vector<std::string> tokens_;
  absl::flat_hash_map<std::string, int32_t> words_;      // pieces that start a word
  absl::flat_hash_map<std::string, int32_t> continued_;  // "##" pieces, without the "##"
  SpecialTokens special_;
  uint64_t checksum_ = 0;
};

class Tokenizer {
 public:
  static constexpr int kDefaultMaxCharsPerWord = 200;

  // Words longer than `max_chars_per_word` characters become [UNK].
  Tokenizer(std::shared_ptr<const Vocabulary> vocabulary, bool lower_case,
            int max_chars_per_word = kDefaultMaxCharsPerWord);

  // Appends the WordPiece ids of `text` (UTF-8; invalid bytes are dropped,
  // as a UTF-8 decoder with errors="ignore" would).
  void Encode(absl::string_view text, std::vector<int32_t>* ids) const;
  std::vector<int32_t> Encode(absl::string_view text) const;
  // The basic tokenizer alone: words and punctuation before WordPiece.
  std::vector<std::string> BasicTokens(absl::string_view text) const;

  const Vocabulary& vocabulary() const { return *vocabulary_; }
  // Which pieces start a word (not "##" continuations), for whole-word masking.
  bool StartsWord(int32_t id) const { return starts_word_[id]; }

 private:
  template <class Emit>
  void Split(absl::string_view text, Emit&& emit) const;
  void WordPiece(absl::string_view word, std::vector<int32_t>* ids) const;

  std::shared_ptr<const Vocabulary> vocabulary_;
  bool lower_case_;
  int max_chars_per_word_;
  std::vector<bool> starts_word_;
};

}  // namespace pbert::data
