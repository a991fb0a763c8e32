// Corpus readers: WikiExtractor output (`<doc ...>` ... `</doc>`, the title
// line dropped as the MLPerf scripts do, paragraphs split into sentences),
// and BERT's reference input (one sentence per line, blank lines between
// documents).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pbert::data {

// A document as its sentences, in order.
using Document = std::vector<std::string>;

// kAuto: WikiExtractor if the first non-blank line starts with "<doc", else
// text.
enum class CorpusFormat { kAuto, kWikiExtractor, kText };

struct CorpusStats {
  uint64_t bytes = 0;
  uint64_t documents = 0;
  uint64_t sentences = 0;
};

// Streams the documents of `path` to `on_document`, reading it once (a pipe
// reads as a file does). A UTF-8 byte order mark at the start of a line is
// skipped. Fails, naming the file, if it is empty, looks
// binary (NUL bytes), is not UTF-8, has a line over TextLines' limit, or
// holds no sentence.
absl::Status ReadCorpus(const std::string& path, CorpusFormat format,
                        const std::function<void(Document&&)>& on_document, CorpusStats* stats);

// Splits a paragraph into sentences at '.', '!' or '?' (with closing quotes
// or brackets) followed by space and an upper-case letter, digit or opening
// quote; not after common abbreviations or single-letter initials.
std::vector<std::string> SplitSentences(absl::string_view paragraph);

// OK if `line` (line `line_number` of `file`) is well-formed UTF-8; else
// InvalidArgument naming the file, line and the first bad byte, with what to
// do. The tokenizer takes UTF-8: other bytes would be dropped unseen.
absl::Status CheckUtf8(absl::string_view line, const std::string& file, uint64_t line_number);

}  // namespace pbert::data
