#include "data/tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/status.h"
#include "common/text_lines.h"

namespace pbert::data {
namespace {

bool IsCjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// What the reference's cleanup drops: NUL, U+FFFD and category C* except
// the three whitespace controls.
bool IsDropped(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c == 0 || c == 0xFFFD) return true;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// Whitespace for the cleanup (space, \t, \n, \r, Zs) and for Python's
// str.split() that follows it (Zl, Zp survive the cleanup and split words).
bool IsSpace(UChar32 c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  auto type = u_charType(c);
  return type == U_SPACE_SEPARATOR || type == U_LINE_SEPARATOR || type == U_PARAGRAPH_SEPARATOR;
}

bool IsPunctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  switch (u_charType(c)) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

// Lower-cases (full case mapping), decomposes (NFD) and drops non-spacing
// marks: the reference's lower() and _run_strip_accents.
std::string LowerAndStripAccents(absl::string_view word) {
  icu::UnicodeString text = icu::UnicodeString::fromUTF8(
      icu::StringPiece(word.data(), static_cast<int32_t>(word.size())));
  text.toLower(icu::Locale::getRoot());
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(error);
  icu::UnicodeString decomposed = nfd->normalize(text, error);
  if (U_FAILURE(error)) decomposed = text;
  icu::UnicodeString kept;
  for (int32_t i = 0; i < decomposed.length();) {
    UChar32 c = decomposed.char32At(i);
    if (u_charType(c) != U_NON_SPACING_MARK) kept.append(c);
    i += U16_LENGTH(c);
  }
  std::string out;
  kept.toUTF8String(out);
  return out;
}

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::Load(const std::string& path) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "vocabulary"));
  Vocabulary v;
  std::string line;
  ChecksumStream checksum;
  while (lines.Next(&line)) {
    if (lines.line_number() == 1 && absl::StartsWith(line, "\xEF\xBB\xBF")) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ":1: starts with a UTF-8 byte order mark, which would become part of its first "
          "token; remove it: sed -i '1s/^\\xEF\\xBB\\xBF//' ",
          path));
    }
    std::string token(absl::StripAsciiWhitespace(line));
    int32_t id = static_cast<int32_t>(v.tokens_.size());
    if (token.empty()) {
      // tokenization.py would give the empty token this id and count it in
      // every later one: almost always a damaged file, never what was meant.
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", id + 1,
          ": a blank line, where vocab.txt has one token per line (BERT's tokenizer would "
          "give it id ",
          id,
          " and shift every later token's id); remove it, or write a placeholder such as "
          "[unused] in its place if the ids must stay"));
    }
    bool fresh = absl::StartsWith(token, "##") && token.size() > 2
                     ? v.continued_.emplace(token.substr(2), id).second
                     : v.words_.emplace(token, id).second;
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", id + 1, ": token '", token, "' appears twice"));
    }
    checksum.Update({reinterpret_cast<const uint8_t*>(token.data()), token.size() + 1});
    v.tokens_.push_back(std::move(token));
  }
  RETURN_IF_ERROR(lines.status());
  if (v.tokens_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the vocabulary is empty"));
  }
  auto require = [&](const char* name, int32_t* id) -> absl::Status {
    auto it = v.words_.find(name);
    if (it == v.words_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the vocabulary has no ", name,
                       " token; use a BERT vocab.txt with [PAD], [UNK], [CLS], [SEP] and [MASK]"));
    }
    *id = it->second;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(require("[PAD]", &v.special_.pad));
  RETURN_IF_ERROR(require("[UNK]", &v.special_.unk));
  RETURN_IF_ERROR(require("[CLS]", &v.special_.cls));
  RETURN_IF_ERROR(require("[SEP]", &v.special_.sep));
  RETURN_IF_ERROR(require("[MASK]", &v.special_.mask));
  v.checksum_ = checksum.Digest();
  return v;
}

int32_t Vocabulary::Find(absl::string_view piece, bool continuation) const {
  const auto& map = continuation ? continued_ : words_;
  auto it = map.find(piece);
  return it == map.end() ? -1 : it->second;
}

Tokenizer::Tokenizer(std::shared_ptr<const Vocabulary> vocabulary, bool lower_case,
                     int max_chars_per_word)
    : vocabulary_(std::move(vocabulary)),
      lower_case_(lower_case),
      max_chars_per_word_(max_chars_per_word) {
  starts_word_.resize(vocabulary_->size());
  for (int32_t id = 0; id < vocabulary_->size(); ++id) {
    const std::string& t = vocabulary_->token(id);
    starts_word_[id] = !(absl::StartsWith(t, "##") && t.size() > 2);
  }
}

template <class Emit>
void Tokenizer::Split(absl::string_view text, Emit&& emit) const {
  // Pieces of one whitespace-delimited word are split further on
  // punctuation after lower-casing, as the reference orders it.
  auto finish_word = [&](std::string& word, bool ascii) {
    if (word.empty()) return;
    if (lower_case_) {
      if (ascii) {
        absl::AsciiStrToLower(&word);
      } else {
        word = LowerAndStripAccents(word);
      }
    }
    const char* s = word.data();
    int32_t n = static_cast<int32_t>(word.size()), i = 0, start = 0;
    while (i < n) {
      int32_t at = i;
      UChar32 c;
      U8_NEXT(s, i, n, c);
      if (c < 0) continue;
      bool space = IsSpace(c);
      if (space || IsPunctuation(c)) {
        if (at > start) emit(absl::string_view(s + start, at - start));
        if (!space) emit(absl::string_view(s + at, i - at));
        start = i;
      }
    }
    if (n > start) emit(absl::string_view(s + start, n - start));
    word.clear();
  };
  std::string word;
  bool ascii = true;
  const char* s = text.data();
  int32_t n = static_cast<int32_t>(text.size()), i = 0;
  while (i < n) {
    int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0 || IsDropped(c)) continue;
    if (IsSpace(c)) {
      finish_word(word, ascii);
      ascii = true;
    } else if (IsCjk(c)) {
      finish_word(word, ascii);
      word.assign(s + at, i - at);
      finish_word(word, false);
      ascii = true;
    } else {
      word.append(s + at, i - at);
      ascii = ascii && c < 0x80;
    }
  }
  finish_word(word, ascii);
}

void Tokenizer::WordPiece(absl::string_view word, std::vector<int32_t>* ids) const {
  // Code point boundaries: pieces never split a character.
  std::vector<int32_t> bounds;
  const char* s = word.data();
  int32_t n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n;) {
    bounds.push_back(i);
    U8_FWD_1(s, i, n);
  }
  bounds.push_back(n);
  const size_t chars = bounds.size() - 1;
  const size_t before = ids->size();
  if (chars > static_cast<size_t>(max_chars_per_word_)) {
    ids->push_back(vocabulary_->special().unk);
    return;
  }
  for (size_t start = 0; start < chars;) {
    int32_t found = -1;
    size_t end = chars;
    for (; end > start; --end) {
      found = vocabulary_->Find(word.substr(bounds[start], bounds[end] - bounds[start]), start > 0);
      if (found >= 0) break;
    }
    if (found < 0) {
      ids->resize(before);
      ids->push_back(vocabulary_->special().unk);
      return;
    }
    ids->push_back(found);
    start = end;
  }
}

void Tokenizer::Encode(absl::string_view text, std::vector<int32_t>* ids) const {
  Split(text, [&](absl::string_view piece) { WordPiece(piece, ids); });
}

std::vector<int32_t> Tokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  Encode(text, &ids);
  return ids;
}

std::vector<std::string> Tokenizer::BasicTokens(absl::string_view text) const {
  std::vector<std::string> out;
  Split(text, [&](absl::string_view piece) { out.emplace_back(piece); });
  return out;
}

}  // namespace pbert::data
