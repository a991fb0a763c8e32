// The pack index: which sequences of an instance store share each row.
// Small (4 bytes per sequence), versioned, checksummed, written atomically;
// the token data itself is never rewritten. Layout: docs/formats.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/atomic_file.h"
#include "data/packing/plan.h"

namespace pbert::data {

inline constexpr char kPackIndexMagic[8] = {'P', 'B', 'P', 'A', 'C', 'K', 'I', 'X'};
inline constexpr uint32_t kPackIndexVersion = 2;

class PackIndex {
 public:
  PackIndex() = default;
  // `plan` gives the row shapes in order; `sequence_ids` lists the members of
  // every row, row after row, in the order of the plan's lengths.
  PackIndex(PackingPlan plan, std::vector<uint32_t> sequence_ids);

  uint64_t rows() const { return row_start_.empty() ? 0 : row_start_.back(); }
  uint64_t sequences() const { return ids_.size(); }
  int max_len() const { return plan_.max_len; }
  const PackingPlan& plan() const { return plan_; }

  // The sequence ids of row `r` (0 <= r < rows()), longest first.
  absl::Span<const uint32_t> Row(uint64_t r) const;

  // OK iff every sequence id in [0, lengths.size()) is in exactly one row,
  // each row's members have the lengths its strategy says, and rows fit.
  absl::Status Verify(absl::Span<const uint16_t> lengths) const;

  // XXH3 of the row shapes and ids: two indexes with the same checksum
  // give the same rows.
  uint64_t Checksum() const;

  // `existing`: what happens to a file already at `path`.
  absl::Status Write(const std::string& path, const std::string& algorithm,
                     Existing existing = Existing::kReplace) const;
  static absl::StatusOr<PackIndex> Read(const std::string& path);

 private:
  void Index();

  PackingPlan plan_;
  std::vector<uint32_t> ids_;
  // Per strategy: the first row and the first id position.
  std::vector<uint64_t> row_start_;
  std::vector<uint64_t> id_start_;
};

// The pack index of rows made elsewhere (NVIDIA's packed HDF5), whose
// sequences are numbered in row order: row r holds the next `depths[r]`
// sequences; `lengths[i]` is sequence i's length. 1 byte per row in, so
// that an import of any size keeps little. Fails unless the depths cover
// every sequence once and every row fits `max_len`.
absl::StatusOr<PackIndex> PackIndexFromRows(int max_len, absl::Span<const uint8_t> depths,
                                            absl::Span<const uint16_t> lengths);

// Assigns real sequences to the rows of `plan`: the sequences of each length
// are shuffled with `seed`, then dealt to rows in plan order. O(n) time;
// memory 4 bytes per sequence beyond the index itself. `lengths[i]` is the
// length of sequence i; the plan must cover exactly these lengths.
absl::StatusOr<PackIndex> AssignSequences(const PackingPlan& plan,
                                          absl::Span<const uint16_t> lengths, uint64_t seed);

}  // namespace pbert::data
