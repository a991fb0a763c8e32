// Sequence-length histograms: what every packing algorithm works on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pbert::data {

struct LengthHistogram {
  // counts[l] = number of sequences of length l, for l in 1..max_len;
  // counts[0] is always 0.
  std::vector<uint64_t> counts;

  explicit LengthHistogram(int max_len = 0) : counts(max_len + 1, 0) {}
  int max_len() const { return static_cast<int>(counts.size()) - 1; }
  uint64_t sequences() const;
  uint64_t tokens() const;
  // The speed-up over one sequence per row if packing left no padding:
  // sequences * max_len / tokens.
  double TheoreticalSpeedup() const;
  // ceil(tokens / max_len): no packing can use fewer rows.
  uint64_t LowerBoundRows() const;
};

// Counts lengths; fails if one is 0 or above `max_len`.
absl::StatusOr<LengthHistogram> HistogramOf(absl::Span<const uint16_t> lengths, int max_len);

// Reads a bare histogram file: after `#` comment lines and blank lines, line i
// holds the count of sequences of length i. Lines past the last are zero.
// Fails, naming the file and line, on a non-integer, a negative count, or a
// non-zero count for a length above `max_len`.
absl::StatusOr<LengthHistogram> ReadHistogramFile(const std::string& path, int max_len);

}  // namespace pbert::data
