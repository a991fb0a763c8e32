#include "data/corpus.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/status.h"
#include "common/text_lines.h"

namespace pbert::data {
namespace {

bool IsClosing(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

bool StartsSentence(unsigned char c) {
  // ASCII upper case, digits and opening quotes; any non-ASCII lead byte is
  // taken as a letter (accented capitals, other scripts).
  return std::isupper(c) || std::isdigit(c) || c == '"' || c == '\'' || c == '(' || c >= 0x80;
}

// The word before position `end` (exclusive), without leading punctuation.
absl::string_view WordBefore(absl::string_view text, size_t end) {
  size_t start = end;
  while (start > 0 && !absl::ascii_isspace(static_cast<unsigned char>(text[start - 1]))) --start;
  absl::string_view word = text.substr(start, end - start);
  while (!word.empty() && (word.front() == '(' || word.front() == '"')) word.remove_prefix(1);
  return word;
}

bool IsAbbreviation(absl::string_view word) {
  static const auto* kAbbreviations = new absl::flat_hash_set<std::string>{
      "mr",   "mrs", "ms",  "dr",  "prof", "sr",  "jr",   "st",  "mt",  "ft",     "vs",
      "etc",  "e.g", "i.e", "u.s", "u.k",  "no",  "nos",  "vol", "fig", "approx", "ca",
      "c",    "cf",  "al",  "inc", "ltd",  "co",  "corp", "gen", "col", "lt",     "sgt",
      "capt", "rev", "hon", "jan", "feb",  "mar", "apr",  "jun", "jul", "aug",    "sep",
      "sept", "oct", "nov", "dec", "op",   "pp",  "ed",   "eds"};
  if (word.size() == 1 && absl::ascii_isalpha(static_cast<unsigned char>(word[0]))) {
    return true;  // an initial: "J. R. R. Tolkien"
  }
  return kAbbreviations->contains(absl::AsciiStrToLower(word));
}

// The byte offset of the first byte of `text` that is not well-formed
// UTF-8, or npos.
size_t FirstInvalidUtf8(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = bytes[i];
    size_t follow = 0;
    unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      follow = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      follow = 2;
      if (c == 0xe0) low = 0xa0;   // no overlong forms
      if (c == 0xed) high = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      follow = 3;
      if (c == 0xf0) low = 0x90;
      if (c == 0xf4) high = 0x8f;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + follow >= n) return i;  // cut short
    for (size_t k = 1; k <= follow; ++k) {
      const unsigned char b = bytes[i + k];
      if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xbf)) return i;
    }
    i += follow + 1;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::Status CheckUtf8(absl::string_view line, const std::string& file, uint64_t line_number) {
  const size_t bad = FirstInvalidUtf8(line);
  if (bad == absl::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s:%d: not UTF-8 (byte 0x%02x at column %d); convert the file, e.g. iconv -f latin1 -t "
      "utf-8",
      file, line_number, static_cast<unsigned char>(line[bad]), bad + 1));
}

std::vector<std::string> SplitSentences(absl::string_view paragraph) {
  std::vector<std::string> out;
  size_t start = 0;
  const size_t n = paragraph.size();
  for (size_t i = 0; i < n; ++i) {
    char c = paragraph[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t end = i + 1;
    while (end < n && IsClosing(paragraph[end])) ++end;
    if (end >= n || paragraph[end] != ' ') continue;
    size_t next = end;
    while (next < n && paragraph[next] == ' ') ++next;
    if (next >= n || !StartsSentence(static_cast<unsigned char>(paragraph[next]))) continue;
    if (c == '.' && IsAbbreviation(WordBefore(paragraph, i))) continue;
    absl::string_view sentence = absl::StripAsciiWhitespace(paragraph.substr(start, end - start));
    if (!sentence.empty()) out.emplace_back(sentence);
    start = next;
    i = next - 1;
  }
  absl::string_view rest = absl::StripAsciiWhitespace(paragraph.substr(std::min(start, n)));
  if (!rest.empty()) out.emplace_back(rest);
  return out;
}

absl::Status ReadCorpus(const std::string& path, CorpusFormat format,
                        const std::function<void(Document&&)>& on_document, CorpusStats* stats) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "input", Readable::kStream));
  Document document;
  const uint64_t sentences_before = stats->sentences;
  auto flush = [&] {
    if (document.empty()) return;
    stats->documents += 1;
    stats->sentences += document.size();
    on_document(std::move(document));
    document.clear();
  };
  std::string line;
  bool title_next = false;
  while (lines.Next(&line)) {
    stats->bytes += line.size() + 1;
    RETURN_IF_ERROR(CheckUtf8(line, path, lines.line_number()));
    absl::string_view text = absl::StripAsciiWhitespace(line);
    // A byte order mark (an editor's, or one per file after `cat`) is not
    // text: BERT's tokenizer drops U+FEFF, and "<doc" after it is a document.
    while (absl::ConsumePrefix(&text, "\xEF\xBB\xBF"))
      text = absl::StripLeadingAsciiWhitespace(text);
    if (format == CorpusFormat::kAuto) {
      if (text.empty()) continue;
      format = absl::StartsWith(text, "<doc") ? CorpusFormat::kWikiExtractor : CorpusFormat::kText;
    }
    if (format == CorpusFormat::kText) {
      if (text.empty()) {
        flush();
      } else {
        document.emplace_back(text);
      }
      continue;
    }
    if (absl::StartsWith(text, "<doc")) {
      flush();
      title_next = true;
    } else if (text == "</doc>") {
      flush();
    } else if (title_next) {
      title_next = false;  // the article's title repeats as its first line
    } else if (!text.empty()) {
      for (std::string& s : SplitSentences(text)) document.push_back(std::move(s));
    }
  }
  RETURN_IF_ERROR(lines.status());
  flush();
  if (stats->sentences == sentences_before) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds no sentences", lines.line_number() == 0 ? " (the file is empty)" : "",
        "; expected WikiExtractor output or one sentence per line"));
  }
  return absl::OkStatus();
}

}  // namespace pbert::data
