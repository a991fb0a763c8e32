#include "data/histogram.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status.h"
#include "common/text_lines.h"

namespace pbert::data {

uint64_t LengthHistogram::sequences() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

uint64_t LengthHistogram::tokens() const {
  uint64_t t = 0;
  for (size_t l = 1; l < counts.size(); ++l) t += l * counts[l];
  return t;
}

double LengthHistogram::TheoreticalSpeedup() const {
  uint64_t t = tokens();
  return t == 0 ? 1.0 : static_cast<double>(sequences()) * max_len() / static_cast<double>(t);
}

uint64_t LengthHistogram::LowerBoundRows() const {
  uint64_t s = static_cast<uint64_t>(max_len());
  return s == 0 ? 0 : (tokens() + s - 1) / s;
}

absl::StatusOr<LengthHistogram> HistogramOf(absl::Span<const uint16_t> lengths, int max_len) {
  LengthHistogram histogram(max_len);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] == 0 || lengths[i] > max_len) {
      return absl::OutOfRangeError(
          absl::StrCat("sequence ", i, " has length ", lengths[i], ", outside 1..", max_len));
    }
    ++histogram.counts[lengths[i]];
  }
  return histogram;
}

absl::StatusOr<LengthHistogram> ReadHistogramFile(const std::string& path, int max_len) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "histogram file"));
  LengthHistogram histogram(max_len);
  std::string line;
  int length = 0;
  uint64_t tokens = 0;
  constexpr uint64_t kMaxTokens = uint64_t{1} << 53;
  while (lines.Next(&line)) {
    const uint64_t line_number = lines.line_number();
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    ++length;
    uint64_t count;
    if (!absl::SimpleAtoi(text, &count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_number, ": expected a non-negative integer count, got '", text, "'"));
    }
    if (count == 0) continue;
    if (length > max_len) {
      return absl::OutOfRangeError(absl::StrCat(
          path, ":", line_number, ": ", count, " sequences of length ", length,
          " exceed the maximum length ", max_len, "; raise --max-len (data.max_seq_len)"));
    }
    // Totals stay exact in a double (the packing ratios and reports use
    // them): at most 2^53 tokens, far above any corpus.
    uint64_t line_tokens = 0;
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(length), &line_tokens) ||
        __builtin_add_overflow(tokens, line_tokens, &tokens) || tokens > kMaxTokens) {
      return absl::OutOfRangeError(absl::StrCat(
          path, ":", line_number, ": the counts up to here hold more than 2^53 tokens; a "
          "histogram counts the sequences of one dataset, far fewer"));
    }
    histogram.counts[length] = count;
  }
  RETURN_IF_ERROR(lines.status());
  if (histogram.sequences() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the histogram holds no sequences"));
  }
  return histogram;
}

}  // namespace pbert::data
