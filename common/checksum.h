// Checksums for our file formats: XXH3-64, which hashes at memory speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"

namespace pbert {

// The XXH3-64 hash of `data` (seed 0).
uint64_t Checksum64(absl::Span<const uint8_t> data);

// Incremental form of Checksum64 for data written in pieces; gives the same
// value as hashing the concatenation at once.
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;

  void Update(absl::Span<const uint8_t> data);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pbert
