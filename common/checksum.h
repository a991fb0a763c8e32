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

// CRC-32C (Castagnoli), as TensorFlow's checkpoints and LevelDB tables store
// it; `crc` continues an earlier value (0 to start).
uint32_t Crc32c(absl::Span<const uint8_t> data, uint32_t crc = 0);

// CRC-32 (IEEE 802.3), as zip archives store it.
uint32_t Crc32(absl::Span<const uint8_t> data, uint32_t crc = 0);

// Whether a reader compares a file's stored checksums with its bytes:
// always, except in the fuzz targets' build (scripts/fuzz), so that a
// mutated input reaches the parser behind its checksum, as fuzzing builds
// do (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, libFuzzer's convention).
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
inline constexpr bool kChecksumsCompared = false;
#else
inline constexpr bool kChecksumsCompared = true;
#endif

// The masked form those formats store ("a CRC of data that contains CRCs is
// weak", LevelDB's crc32c.h): rotate right by 15, add a constant.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace pbert
